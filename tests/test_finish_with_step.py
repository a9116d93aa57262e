"""A message item's finish commits with its turn's last step (issue 12, own overhead per step): one round trip less
a turn, and the turn's end and its item's end are one commit. `StepRider` is the store's part (any write committed
with a step, all or nothing with it); `FinishWithLastStep` the daemon's (not for a run watched from another
process, whose relayed events must be written before its end)."""

from __future__ import annotations

import asyncio
import signal
from types import SimpleNamespace
from typing import Any

import pytest
from sqlalchemy import bindparam, select, update

from pagemind.runtime.loop import StopReason, TurnEnd
from pagemind.runtime.model_client import ModelRequest
from pagemind.runtime.settings import Settings
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.step_commit import StepRider
from pagemind.runtime.state.store import StaleBlocks, StateStore
from pagemind.runtime.state.tables import AgentRow
from pagemind.runtime.testing import FunctionModel, by_purpose
from pagemind.scheduler.catalog import AgentCatalog
from pagemind.scheduler.daemon import Daemon
from pagemind.scheduler.dispatcher import FinishWithLastStep
from pagemind.scheduler.fanout import RunFanout
from tests.daemon_support import ledger_step, markers, write_agents
from tests.test_daemon_crash import _run_child, zygote  # noqa: F401  (the fixture, shared)
from tests.test_daemon_core import make_daemon
from tests.test_step_commit import edit, prepared, record

agents = AgentRow.__table__
RENAME = (update(agents).where(agents.c.id == bindparam("p_agent")).values(summary=bindparam("p_summary"))
          .returning(agents.c.id, agents.c.summary))


def summary(store: StateStore, agent_id: int) -> str:
    with store.engine.connect() as conn:
        return conn.execute(select(agents.c.summary).where(agents.c.id == agent_id)).scalar_one()


async def test_a_rider_commits_with_its_step_and_returns_its_row(database_url):
    store, agent_id, versions = prepared(database_url)
    rider = StepRider(RENAME, {"p_agent": agent_id, "p_summary": "rode along"})
    step_id, _ = await store.commit_step(agent_id, record(1), [], [edit("human", "", "a")], versions, rider)
    assert rider.row == {"id": agent_id, "summary": "rode along"}
    assert summary(store, agent_id) == "rode along" and [s.id for s in store.steps(agent_id)] == [step_id]

    missing = StepRider(RENAME, {"p_agent": agent_id + 1000, "p_summary": "nobody"})  # touches no row
    await store.commit_step(agent_id, record(2), [], [], versions, missing)
    assert missing.row is None and len(store.steps(agent_id)) == 2


async def test_a_rider_is_not_written_when_its_step_is_not(database_url):
    store, agent_id, versions = prepared(database_url)
    await store.commit_step(agent_id, record(1), [], [edit("human", "", "elsewhere")], dict(versions))  # moved
    rider = StepRider(RENAME, {"p_agent": agent_id, "p_summary": "must not land"})
    with pytest.raises(StaleBlocks):
        await store.commit_step(agent_id, record(2), [], [edit("human", "", "mine")], versions, rider)
    assert rider.row is None and summary(store, agent_id) == "" and len(store.steps(agent_id)) == 1


def down_for_boom(request: ModelRequest) -> dict[str, Any]:
    """`ledger_step`, except that a turn whose message is "boom" finds the provider down."""
    if [m["content"] for m in request.messages if m["role"] == "user"][-1] == "boom":
        raise RuntimeError("the provider is down")
    return ledger_step(request)


async def test_a_turns_item_is_finished_by_its_last_step_and_a_failed_one_apart(database_url, tmp_path):
    daemon = make_daemon(database_url, write_agents(tmp_path / "agents"), FunctionModel(by_purpose(down_for_boom)))
    finishes: list[str] = []
    finish = daemon.inbox.finish

    async def counted(item, *args, **kwargs):
        finishes.append(item.content)
        return await finish(item, *args, **kwargs)

    daemon.inbox.finish = counted
    await daemon.start()
    try:
        first = await daemon.submit("alice", "msg 1")
        done = await daemon.wait(first.run_id, 60)
        assert done.state == "done" and done.attempts == 1 and done.finished_at is not None
        async with daemon.agent("alice") as agent:
            steps = agent.store.turn_steps(agent.record.id, done.result["turn_id"])
        assert done.result == {"reply": "ack 1", "stop_reason": "send_message", "steps": 2,
                               "turn_id": steps[-1].turn_id}
        assert [s.stop_reason for s in steps] == [None, "send_message"]
        assert finishes == []  # no statement of its own

        second = await daemon.submit("alice", "msg 2")  # the lingering worker's path: claimed by the submission
        assert (await daemon.wait(second.run_id, 60)).result["reply"] == "ack 2" and finishes == []

        failing = await daemon.submit("alice", "boom")  # fails before any step commits: finished apart, failed
        failed = await daemon.wait(failing.run_id, 60)
        assert failed.state == "failed" and "the provider is down" in failed.error and finishes == ["boom"]
    finally:
        await daemon.stop(grace_s=30)


def test_a_run_watched_from_another_process_is_finished_apart():
    fanout = RunFanout("here", relay=SimpleNamespace())
    item = SimpleNamespace(run_id="run-1", id=1, agent_id=1, agent_name="alice")
    inbox = SimpleNamespace(finish_rider=lambda *args: "the rider", finished=lambda item, row: ("finished", row))
    dispatcher = SimpleNamespace(fanout=fanout, inbox=inbox, leases=SimpleNamespace(owner="here"))
    end = TurnEnd("turn-1", "hi", StopReason.SEND_MESSAGE, 2)

    fanout.begin("run-1", 1, watcher="there")  # relayed: its events go to `run_events` before its end
    watched = FinishWithLastStep(dispatcher, item)
    assert watched(end) is None and watched.outcome() is None

    fanout.begin("run-1", 1, watcher="here")  # read in this process only
    unwatched = FinishWithLastStep(dispatcher, item)
    assert unwatched(end) == "the rider"


def test_a_kill_after_the_last_steps_commit_leaves_the_item_done(zygote, tmp_path, database_url):  # noqa: F811
    """Before the fold, a kill between the last step's commit and the finish left the item running: the next
    daemon claimed it again (a second attempt) to find the stored turn. Now both are one commit."""
    make_engine(database_url).dispose()
    folder = write_agents(tmp_path / "agents")
    settings = Settings.from_env({"PAGEMIND_HOME": str(tmp_path / "home"), "DATABASE_URL": database_url})
    client = Daemon(AgentCatalog(folder, StateStore.open(settings.database_url)), settings)  # never started
    asyncio.run(client.submit("alice", "msg 1"))
    # The turn's two steps commit at passes 1 and 2; the child dies right after the second.
    code = _run_child(zygote, tmp_path / "home", database_url, folder, "commit.after_commit@2")
    assert code == -signal.SIGKILL
    [item] = client.inbox.items()
    assert (item.state, item.attempts, item.result["reply"]) == ("done", 1, "ack 1")

    asyncio.run(client.submit("alice", "msg 2"))
    assert _run_child(zygote, tmp_path / "home", database_url, folder) == 0
    assert [(i.state, i.attempts) for i in client.inbox.items()] == [("done", 1), ("done", 1)]
    record = client.store.get_agent("alice")
    human = {b.label: b.value for b in client.store.load_blocks(record.id, client.catalog.spec_for("alice"))}
    assert markers(human["human"]) == ["1", "2"]
    assert [m.content for m in client.store.all_messages(record.id) if m.role == "user"] == ["msg 1", "msg 2"]
