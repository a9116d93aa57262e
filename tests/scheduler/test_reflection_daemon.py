"""Reflection in the daemon: the `reflect` job runs in the agent's line, and `memory.reflection.every_turns` queues
one behind the turn that makes it due (once, however many turns finish before it runs)."""

from __future__ import annotations

import json
from pathlib import Path

from pagemind.runtime.reflection.journal import Journal
from pagemind.runtime.spec.agent import DEFAULT_TOOLS
from pagemind.runtime.testing.models import FunctionModel
from pagemind.runtime.testing.responses import reply_body
from tests.scheduler.test_daemon_core import make_daemon
from tests.support.daemon_support import ledger_step, write_agents

TOOLS = [*DEFAULT_TOOLS, "archival_memory_insert", "archival_search"]


def model(plan: dict) -> FunctionModel:
    """The ledger model for turns; `plan` for reflections."""

    def respond(request):
        if request.purpose == "reflect":
            return reply_body(json.dumps(plan))
        return ledger_step(request) if request.purpose == "step" else reply_body('{"facts": []}')

    return FunctionModel(respond)


async def test_the_reflect_job_runs_in_line(sqlite_url, tmp_path: Path):
    folder = write_agents(tmp_path / "agents", tools=TOOLS)
    daemon = make_daemon(sqlite_url, folder, model({"insights": [{"text": "Alice counts things"}]}))
    await daemon.start()
    try:
        for n in range(2):
            await daemon.submit("alice", f"msg {n}")
        job = await daemon.wait((await daemon.submit("alice", "reflect", kind="job")).run_id, timeout=60)
        again = await daemon.wait((await daemon.submit("alice", "reflect", kind="job")).run_id, timeout=60)
    finally:
        await daemon.stop()
    assert job.state == "done" and job.result["status"] == "done" and job.result["changes"] == {"insights": 1}
    assert [i.state for i in daemon.inbox.items()][:2] == ["done"] * 2  # the turns before it ran first
    assert again.state == "done" and again.result["status"] == "skipped"  # nothing new since
    async with daemon.agent("alice") as agent:
        assert [m.text for m in agent.archival.list()] == ["Alice counts things"]


async def test_every_turns_queues_one_reflect_job_behind_the_turn_that_makes_it_due(sqlite_url, tmp_path: Path):
    folder = write_agents(tmp_path / "agents", tools=TOOLS, memory={"reflection": {"every_turns": 2}})
    daemon = make_daemon(sqlite_url, folder, model({}))
    burst = [await daemon.submit("alice", f"msg {n}") for n in range(3)]  # due after 1 and after 2: one job
    await daemon.start()
    try:
        await daemon.wait(burst[-1].run_id, timeout=60)
        for n in (3, 4):  # after the reflection: due again after msg 4
            await daemon.wait((await daemon.submit("alice", f"msg {n}")).run_id, timeout=60)
        for item in daemon.inbox.items():
            await daemon.wait(item.run_id, timeout=60)
    finally:
        await daemon.stop()
    assert [(i.content, i.state) for i in daemon.inbox.items()] == [
        ("msg 0", "done"),
        ("msg 1", "done"),
        ("msg 2", "done"),
        ("reflect", "done"),
        ("msg 3", "done"),
        ("msg 4", "done"),
        ("reflect", "done"),
    ]
    async with daemon.agent("alice") as agent:
        rows = Journal(agent.store.engine, agent.record.id).all()
        users = [m.id for m in agent.store.all_messages(agent.record.id) if m.role == "user"]
    assert [r.status for r in rows] == ["done", "done"]
    assert rows[0].last_message_id < users[3] < users[4] <= rows[1].last_message_id
