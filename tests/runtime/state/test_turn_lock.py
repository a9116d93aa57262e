"""One turn at a time per agent, across tasks and processes (issue 10, item 1).

Two processes run 12 turns each on one agent, every turn appending to one block: every acknowledged append is
there, once, and no turn's messages interleave with another's. A turn that cannot get the agent within `--wait`
exits 3 having stored nothing. A block write computed from a stale value fails instead of losing an update.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pagemind.runtime.agent import Agent
from pagemind.runtime.loop import run_turn
from pagemind.runtime.state.block_edits import StaleBlocks
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.locks import AgentBusy
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.models import FunctionModel, by_purpose
from pagemind.runtime.testing.specs import build_spec
from tests.support.turn_child import respond, spec_options

ROOT = Path(__file__).resolve().parents[3]
CHILD = ROOT / "tests" / "support" / "turn_child.py"


def children(database_url: str, *tags: str, count: int, **extra: str) -> list[subprocess.Popen]:
    """Start one child per tag and release them together once all are loaded (a barrier on their stdin)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    options = [arg for name, value in extra.items() for arg in (f"--{name.replace('_', '-')}", value)]
    procs = [
        subprocess.Popen(
            [sys.executable, str(CHILD), database_url, tag, str(count), *options],
            cwd=ROOT,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for tag in tags
    ]
    for proc in procs:
        assert proc.stdout.readline().strip() == "ready", proc.stderr.read()
    for proc in procs:
        proc.stdin.write("go\n")
        proc.stdin.flush()
    return procs


def prepare(database_url: str) -> tuple[StateStore, int]:
    """The agent created before the children start (both load it; neither creates it)."""
    store = StateStore(make_engine(database_url))
    return store, store.ensure_agent(build_spec(**spec_options())).id


def test_two_processes_lose_no_append(database_url):
    store, agent_id = prepare(database_url)
    procs = children(database_url, "A", "B", count=12)
    acked = []
    for proc in procs:
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, err
        acked += [line.split()[1] for line in out.splitlines() if line.startswith("ack ")]
    assert len(acked) == 24
    human = store.load_core(agent_id, build_spec(**spec_options()))[0][1].value
    lines = human.split()
    for tag in acked:
        assert lines.count(tag) == 1, (tag, human)
    assert store.block_versions(agent_id)["human"] == 24  # one version per edit, none lost
    # Turns never interleave: each turn's messages are consecutive in the log.
    turns = [m.turn_id for m in store.all_messages(agent_id)]
    runs = [t for i, t in enumerate(turns) if i == 0 or turns[i - 1] != t]
    assert len(runs) == len(set(runs)) == 24


def test_a_busy_agent_exits_3_and_stores_nothing(database_url, tmp_path):
    store, agent_id = prepare(database_url)
    before = store.message_count(agent_id)
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "PAGEMIND_HOME": str(tmp_path),
        "OPENAI_API_KEY": "sk-test",
        "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
    }

    async def while_held() -> subprocess.CompletedProcess:
        async with store.turn_lock(agent_id, wait=0):
            return await asyncio.to_thread(
                subprocess.run,
                [sys.executable, "-m", "pagemind.runtime.cli.main", "run", "tester", "-m", "hello", "--wait", "0.2"],
                cwd=ROOT,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
            )

    done = asyncio.run(while_held())
    assert done.returncode == 3, done.stderr
    assert "agent busy" in done.stderr and "Traceback" not in done.stderr
    assert store.message_count(agent_id) == before


async def test_a_held_lock_makes_send_wait_then_give_up(database_url):
    store, agent_id = prepare(database_url)
    agent = await Agent.load(build_spec(**spec_options()), model=FunctionModel(by_purpose(respond)), store=store)
    async with store.turn_lock(agent_id, wait=0):
        with pytest.raises(AgentBusy):
            await agent.send("A message 0", wait=0.05)
    assert store.message_count(agent_id) == 0
    assert await agent.send("A message 0", wait=0) == "ok A-0"


async def test_two_tasks_of_one_process_take_turns(database_url):
    store, agent_id = prepare(database_url)
    agents = [
        await Agent.load(build_spec(**spec_options()), model=FunctionModel(by_purpose(respond)), store=store)
        for _ in range(2)
    ]
    replies = await asyncio.gather(*(agents[i % 2].send(f"{'AB'[i % 2]} message {i}") for i in range(8)))
    assert sorted(replies) == sorted(f"ok {'AB'[i % 2]}-{i}" for i in range(8))
    human = store.load_core(agent_id, build_spec(**spec_options()))[0][1].value.splitlines()
    assert sorted(h for h in human if h) == sorted(f"{'AB'[i % 2]}-{i}" for i in range(8))


async def test_a_stale_block_write_fails_and_stores_nothing(database_url):
    store, agent_id = prepare(database_url)
    spec = build_spec(**spec_options())
    first = await Agent.load(spec, model=FunctionModel(by_purpose(respond)), store=store)
    second = await Agent.load(spec, model=FunctionModel(by_purpose(respond)), store=store)
    assert await first.send("A message 0") == "ok A-0"
    steps = len(store.steps(agent_id))
    with pytest.raises(StaleBlocks):  # the loop alone bypasses the lock and the reload: the version check holds
        await run_turn(second, "B message 1")
    assert len(store.steps(agent_id)) == steps  # the step that carried the edit stored nothing
    assert store.load_core(agent_id, spec)[0][1].value.split() == ["A-0"]
    assert await second.send("B message 2") == "ok B-2"  # under the lock the stale agent reads its state again
    assert store.load_core(agent_id, spec)[0][1].value.split() == ["A-0", "B-2"]


async def test_agents_of_two_schemas_in_one_postgres_database_do_not_lock_each_other(database_url):
    """Advisory locks are per database; two stores in two schemas both have an agent with id 1 (tenants in
    schemas, parallel test runs), and one's turn must not make the other busy."""
    if not database_url.startswith("postgresql"):
        pytest.skip("about Postgres schemas")
    import sqlalchemy

    from tests.conftest import POSTGRES_URL

    other_schema = f"t_{os.urandom(6).hex()}"
    admin = sqlalchemy.create_engine(POSTGRES_URL)
    with admin.begin() as conn:
        conn.execute(sqlalchemy.text(f"CREATE SCHEMA {other_schema}"))
    try:
        store, agent_id = prepare(database_url)
        other, other_id = prepare(f"{POSTGRES_URL}?options=-csearch_path%3D{other_schema}")
        assert agent_id == other_id
        async with store.turn_lock(agent_id, wait=0):
            async with other.turn_lock(other_id, wait=0):
                with pytest.raises(AgentBusy):  # the same schema's lock still excludes
                    async with store.turn_lock(agent_id, wait=0):
                        pass
        other.engine.dispose()
    finally:
        with admin.begin() as conn:
            conn.execute(sqlalchemy.text(f"DROP SCHEMA {other_schema} CASCADE"))
        admin.dispose()
