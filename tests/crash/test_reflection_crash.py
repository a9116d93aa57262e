"""A reflection killed in the middle of applying its plan (SIGKILL at a named crash point, in a child process) is
finished by the next reflection from its stored plan: every change made exactly once, no new model call."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pagemind.runtime.memory.vectors.stores import close_all
from pagemind.runtime.reflection.journal import Journal
from pagemind.runtime.reflection.run import reflect
from pagemind.runtime.testing.clock import ManualClock
from pagemind.runtime.testing.models import FunctionModel
from tests.runtime.reflection.test_reflection import Planner, load, remember, say

ROOT = Path(__file__).parents[2]

CHILD = """
import asyncio, json, sys
from datetime import datetime
from pagemind.runtime.process.logs import configure_logging
from pagemind.runtime.reflection.run import reflect
from pagemind.runtime.testing.clock import ManualClock
from tests.runtime.reflection.test_reflection import Planner, load
configure_logging("ERROR")

url, plan, start = sys.argv[1], json.loads(sys.argv[2]), datetime.fromisoformat(sys.argv[3])

async def main():
    agent = await load(url, Planner(plan).model, ManualClock(start))
    await reflect(agent)
    print("finished", flush=True)
asyncio.run(main())
"""


def refuse(request):
    raise AssertionError("a resumed reflection must not ask the model again")


@pytest.mark.parametrize("kill_at", ["reflection.applied@1", "reflection.applied@3", "archival.supersede.pending@3"])
async def test_a_reflection_killed_mid_plan_is_finished_once_by_the_next(sqlite_url, kill_at):
    clock = ManualClock()
    agent = await load(sqlite_url, Planner().model, clock)
    say(agent, "Renewed my passport! Mei says hi.", "Great!")
    keep, a, b = [await remember(agent, f"Lin's sister is Mei ({n})") for n in range(3)]
    todo = await remember(agent, "Lin must renew her passport", kind="todo")
    plan = {
        "merges": [{"keep": keep, "drop": [a, b], "reason": "same"}],
        "insights": [{"text": "Lin is close to her sister Mei"}],
        "done": [{"id": todo, "reason": "renewed"}],
        "profile": {"sister": "Mei"},
    }
    close_all()  # the embedded store has one writer process: the child's turn
    env = {**os.environ, "PAGEMIND_KILL_AT": kill_at}
    child = subprocess.run(
        [sys.executable, "-c", CHILD, sqlite_url, json.dumps(plan), clock.now.isoformat()],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == -9 and "finished" not in child.stdout, child.stderr[-2000:]
    journal = Journal(agent.store.engine, agent.record.id)
    assert [r.status for r in journal.all()] == ["applying"]

    clock.advance(hours=1)
    agent = await load(sqlite_url, FunctionModel(refuse), clock)
    result = await reflect(agent)

    assert result["resumed"] and result["status"] == "done"
    assert [r.status for r in journal.all()] == ["done"]
    memories = {m.id: m for m in agent.archival.list(include_superseded=True)}
    assert (memories[a].superseded_by, memories[b].superseded_by, memories[keep].superseded_by) == (keep, keep, None)
    for memory_id in (a, b, todo):
        assert [v.operation for v in agent.archival.history(memory_id)].count("superseded") == 1
    assert [m.text for m in memories.values() if m.kind == "reflection"] == ["Lin is close to her sister Mei"]
    assert len([m for m in memories.values() if m.kind == "progress"]) == 1
    assert len(agent.store.block_history(agent.record.id, "profile")) == 1
    assert json.loads(agent.memory.get("profile").value)["sister"] == "Mei"
    live = {h.id for h in await agent.archival.search("Lin's sister Mei", top_k=10, count_hits=False)}
    assert not live & {a, b, todo}  # the vector store agrees: what SQL superseded, search does not return
