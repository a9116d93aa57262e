"""A flush under `kill -9` (issue 11, item 4): the flush's model work now runs ahead in the background, but what it
stores — the extracted memories, then the eviction — is still written at the flush, in that order. A child
(tests/support/flush_crash_child.py) runs keyed turns through its first flushes and kills itself at a seeded point: while
the background work runs, between two extracted memories, after the memories and before the eviction. After a
restart and the same turns again: no message is lost or doubled, every message that left the window has its
memory in archival memory exactly once, and the summary is in place.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.flush_crash_child import fact, load, text

ROOT = Path(__file__).resolve().parents[2]
CHILD = Path(__file__).parents[1] / "support" / "flush_crash_child.py"
TURNS = 60  # two flushes or more in the child's window
SEEDS = [
    "flush.ahead_started@1",
    "archival.insert.completed@2",
    "flush.before_evict@1",
    "flush.before_evict@2",
    "step.before_model@45",
]


@pytest.mark.parametrize("seed", SEEDS, ids=lambda s: s.replace(".", "_").replace("@", "_"))
async def test_a_kill_during_a_flush_loses_no_memory_and_no_message(database_url, tmp_path, seed):
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PAGEMIND_KILL_AT": seed, "PAGEMIND_HOME": str(tmp_path)}
    child = subprocess.run(
        [sys.executable, str(CHILD), database_url, str(tmp_path), str(TURNS)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert child.returncode == -signal.SIGKILL, f"{seed} never fired: {child.stderr[-2000:]}"

    agent = await load(database_url, tmp_path)  # the restart
    for day in range(TURNS):
        await agent.send(text(day), idempotency_key=f"k-{day}")
    store, agent_id = agent.store, agent.record.id

    users = [m for m in store.all_messages(agent_id) if m.role == "user"]
    assert [m.content for m in users] == [text(day) for day in range(TURNS)], seed
    evicted = [int(m.content.split(":")[0].removeprefix("Day ")) for m in users if not m.in_context]
    assert len(store.summaries(agent_id)) >= 2 and evicted, seed
    memories = [m.text for m in agent.archival.list()]
    for day in evicted:
        assert memories.count(fact(day)) == 1, (seed, day, memories)
    assert agent.window.summary == "Lin gardens."
