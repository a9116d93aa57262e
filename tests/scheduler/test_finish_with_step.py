"""A message item's finish commits with its turn's last step, and its user message with its submission when a
worker lingers for it (issue 12, own overhead per step): two round trips less a turn, and the turn's end and its
item's end are one commit. `LinkedWrite` is the store's part (a write committed with a step or a message, all or
nothing with it); `FinishWithLastStep` and `Daemon._incoming` the daemon's (no finish with the step for a run
watched from another process, whose relayed events must be written before its end)."""

from __future__ import annotations

import asyncio
import signal
from datetime import timedelta
from types import SimpleNamespace
from typing import Any

import pytest
from sqlalchemy import bindparam, select, update

from pagemind.runtime.loop import StopReason, TurnEnd
from pagemind.runtime.messages import Message
from pagemind.runtime.model.client import ModelRequest
from pagemind.runtime.process.settings import Settings
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.records import utcnow
from pagemind.runtime.state.step_commit import LinkedWrite
from pagemind.runtime.state.store import StaleBlocks, StateStore
from pagemind.runtime.state.tables import AgentRow
from pagemind.runtime.testing.doubles import FunctionModel, by_purpose
from pagemind.scheduler.catalog import AgentCatalog
from pagemind.scheduler.daemon import Daemon
from pagemind.scheduler.message_turn import FinishWithLastStep
from pagemind.scheduler.queue.inbox import Inbox
from pagemind.scheduler.streams.fanout import RunFanout
from tests.runtime.state.test_step_commit import edit, prepared, record
from tests.scheduler.test_daemon_core import make_daemon
from tests.support.daemon_support import ledger_model, ledger_step, markers, write_agents
from tests.support.zygote import run_child

agents = AgentRow.__table__
SET_SUMMARY = (
    update(agents)
    .where(agents.c.id == bindparam("p_agent"))
    .values(summary=bindparam("p_summary"))
    .returning(agents.c.id, agents.c.summary)
)


def summary(store: StateStore, agent_id: int) -> str:
    with store.engine.connect() as conn:
        return conn.execute(select(agents.c.summary).where(agents.c.id == agent_id)).scalar_one()


async def test_a_rider_commits_with_its_step_and_returns_its_row(database_url):
    store, agent_id, versions = prepared(database_url)
    rider = LinkedWrite(SET_SUMMARY, {"p_agent": agent_id, "p_summary": "rode along"})
    step_id, _ = await store.commit_step(agent_id, record(1), [], [edit("human", "", "a")], versions, rider)
    assert rider.row == {"id": agent_id, "summary": "rode along"}
    assert summary(store, agent_id) == "rode along" and [s.id for s in store.steps(agent_id)] == [step_id]

    missing = LinkedWrite(SET_SUMMARY, {"p_agent": agent_id + 1000, "p_summary": "nobody"})  # touches no row
    await store.commit_step(agent_id, record(2), [], [], versions, missing)
    assert missing.row is None and len(store.steps(agent_id)) == 2


async def test_a_rider_is_not_written_when_its_step_is_not(database_url):
    store, agent_id, versions = prepared(database_url)
    await store.commit_step(agent_id, record(1), [], [edit("human", "", "elsewhere")], dict(versions))  # moved
    rider = LinkedWrite(SET_SUMMARY, {"p_agent": agent_id, "p_summary": "must not land"})
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
        assert done.result == {
            "reply": "ack 1",
            "stop_reason": "send_message",
            "steps": 2,
            "turn_id": steps[-1].turn_id,
        }
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
    rider = SimpleNamespace(row={"state": "done"})
    inbox = SimpleNamespace(finish_rider=lambda *args: rider, finished=lambda item, row: ("finished", row))
    end = TurnEnd("turn-1", "hi", StopReason.SEND_MESSAGE, 2)

    fanout.begin("run-1", 1, watcher="there")  # relayed: its events go to `run_events` before its end
    watched = FinishWithLastStep(inbox, fanout, "here", item)
    assert watched(end) is None and watched.outcome() is None

    fanout.begin("run-1", 1, watcher="here")  # read in this process only
    unwatched = FinishWithLastStep(inbox, fanout, "here", item)
    assert unwatched(end) is rider and unwatched.outcome() == ("finished", {"state": "done"})


def test_a_kill_after_the_last_steps_commit_leaves_the_item_done(zygote, tmp_path, database_url):
    """Before the fold, a kill between the last step's commit and the finish left the item running: the next
    daemon claimed it again (a second attempt) to find the stored turn. Now both are one commit."""
    make_engine(database_url).dispose()
    folder = write_agents(tmp_path / "agents")
    settings = Settings.from_env({"PAGEMIND_HOME": str(tmp_path / "home"), "DATABASE_URL": database_url})
    client = Daemon(AgentCatalog(folder, StateStore.open(settings.database_url)), settings)  # never started
    asyncio.run(client.submit("alice", "msg 1"))
    # The turn's two steps (a memory edit, held, then the reply) commit together: the child dies right after.
    code = run_child(zygote, tmp_path / "home", database_url, folder, "commit.after_commit@1")
    assert code == -signal.SIGKILL
    [item] = client.inbox.items()
    assert (item.state, item.attempts, item.result["reply"]) == ("done", 1, "ack 1")

    asyncio.run(client.submit("alice", "msg 2"))
    assert run_child(zygote, tmp_path / "home", database_url, folder) == 0
    assert [(i.state, i.attempts) for i in client.inbox.items()] == [("done", 1), ("done", 1)]
    record = client.store.get_agent("alice")
    human = {b.label: b.value for b in client.store.load_blocks(record.id, client.catalog.spec_for("alice"))}
    assert markers(human["human"]) == ["1", "2"]
    assert [m.content for m in client.store.all_messages(record.id) if m.role == "user"] == ["msg 1", "msg 2"]


async def test_a_message_for_a_lingering_worker_is_stored_with_its_item(database_url, tmp_path):
    """The other end of the turn: a submission claimed for the worker lingering on the agent also stores the turn's
    user message (one statement for both), and the turn begins with it; a message a failed turn left unanswered is
    not stored again (its retry reuses it)."""
    daemon = make_daemon(
        database_url, write_agents(tmp_path / "agents"), FunctionModel(by_purpose(down_for_boom)), linger_s=3600
    )
    accepts: list[str] = []
    accept = daemon.store.accept_message

    async def counted(agent_id, message, key=None):
        accepts.append(message.content)
        return await accept(agent_id, message, key)

    daemon.store.accept_message = counted
    await daemon.start()
    try:
        first = await daemon.submit("alice", "msg 1")  # nobody lingers yet: stored by the turn
        assert first.accepted is None and (await daemon.wait(first.run_id, 60)).state == "done"
        second = await daemon.submit("alice", "msg 2", idempotency_key="k2")
        assert second.state == "running" and second.accepted is not None and second.accepted.id is not None
        done = await daemon.wait(second.run_id, 60)
        assert (done.state, done.attempts, done.result["turn_id"]) == ("done", 1, second.accepted.turn_id)
        assert accepts == ["msg 1"]
        retried = await daemon.submit("alice", "msg 2", idempotency_key="k2")  # the worker lingers: same run, no turn
        assert (retried.run_id, retried.accepted) == (second.run_id, None)

        failing = await daemon.submit("alice", "boom")
        assert (await daemon.wait(failing.run_id, 60)).state == "failed"
        again = await daemon.submit("alice", "boom")  # unanswered at the end of the window: the turn reuses it
        assert again.accepted is None and (await daemon.wait(again.run_id, 60)).state == "failed"
    finally:
        await daemon.stop(grace_s=30)
    agent_id = daemon.catalog.agent_id("alice")
    users = [m.content for m in daemon.store.all_messages(agent_id) if m.role == "user"]
    assert users == ["msg 1", "msg 2", "boom"]
    async with daemon.agent("alice") as agent:
        assert markers(agent.memory.get("human").value) == ["1", "2"]


async def test_a_message_stored_with_its_item_is_resumed_by_the_next_daemon(database_url, tmp_path):
    """A daemon killed after such a submission committed leaves the item running with its turn's message stored:
    the next daemon claims it again and resumes that turn, storing the message no second time."""
    daemon = make_daemon(database_url, write_agents(tmp_path / "agents"), ledger_model())
    await daemon.catalog.read_origin("alice")
    agent_id = daemon.catalog.agent_id("alice")
    message = Message("user", "msg 7", utcnow(), turn_id="turn-of-the-dead")
    gone = ("a-daemon-that-died", utcnow() - timedelta(seconds=1))
    item, new = await daemon.inbox.submit(
        agent_id, "alice", "message", "msg 7", "key-7", utcnow(), claim_for=gone, accept=message
    )
    assert new and item.state == "running" and item.accepted.turn_id == "turn-of-the-dead"
    await daemon.start()
    try:
        done = await daemon.wait(item.run_id, 60)
    finally:
        await daemon.stop(grace_s=30)
    assert (done.state, done.attempts, done.result["turn_id"]) == ("done", 2, "turn-of-the-dead")
    assert [m.content for m in daemon.store.all_messages(agent_id) if m.role == "user"] == ["msg 7"]


async def test_a_message_is_stored_with_an_item_only_when_the_insert_claims_it(database_url, tmp_path):
    """A pending item's turn stores its own user message, so one stored with it would be a second: `accept` without
    a claim (or without the store to write it) is refused, and nothing is stored."""
    daemon = make_daemon(database_url, write_agents(tmp_path / "agents"), ledger_model())
    await daemon.catalog.read_origin("alice")
    agent_id = daemon.catalog.agent_id("alice")
    message = Message("user", "msg 1", utcnow(), turn_id="t1")
    with pytest.raises(ValueError, match="claim_for"):
        await daemon.inbox.submit(agent_id, "alice", "message", "msg 1", None, utcnow(), accept=message)
    with pytest.raises(ValueError, match="store"):
        await Inbox(daemon.store.engine).submit(
            agent_id, "alice", "message", "msg 1", None, utcnow(), claim_for=("here", utcnow()), accept=message
        )
    assert daemon.inbox.items() == [] and daemon.store.all_messages(agent_id) == []
