"""The daemon's cheaper path per turn (issue 12, throughput): a worker keeps its agent for `linger_s` after the
agent's inbox empties and runs its next message without taking the lease and lock again; a message submitted
through another daemon for an agent lingering here runs here at once (Postgres); a submission here starts a worker
directly; the finish says whether more items wait; idle pooled connections are pinged, busy ones are not."""

from __future__ import annotations

import asyncio
from dataclasses import replace
from pathlib import Path

import pytest
import sqlalchemy

from pagemind.runtime.state import engine as engine_module
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.records import utcnow
from pagemind.runtime.testing.models import FunctionModel, by_purpose
from tests.scheduler.test_daemon_core import make_daemon
from tests.scheduler.test_daemon_wakeup import scans_over, spy
from tests.support.daemon_support import ledger_model, ledger_step, markers, write_agents


@pytest.fixture
def folder(tmp_path) -> Path:
    return write_agents(tmp_path / "agents")


async def test_a_worker_keeps_its_agent_for_the_next_message_and_gives_it_back_at_stop(database_url, folder):
    daemon = make_daemon(database_url, folder, ledger_model(), linger_s=3600)
    await daemon.start()
    try:
        first = await daemon.submit("alice", "msg 1")
        assert (await daemon.wait(first.run_id, 60)).state == "done"
        # The worker lingers: the agent's lease and its worker are kept for the next message.
        assert daemon.leases.holders() == {first.agent_id: daemon.owner}
        worker = daemon.dispatcher.workers[first.agent_id]
        second = await daemon.submit("alice", "msg 2")
        done = await daemon.wait(second.run_id, 60)
        assert done.state == "done" and done.result["reply"] == "ack 2" and done.attempts == 1
        assert daemon.dispatcher.workers[first.agent_id] is worker  # the same worker ran it
    finally:
        # A lingering worker ends at once on stop, not after its linger nor the grace period.
        await asyncio.wait_for(daemon.stop(grace_s=3600), 60)
    assert daemon.leases.holders() == {} and daemon.dispatcher.workers == {}
    async with daemon.agent("alice") as agent:
        assert markers(agent.memory.get("human").value) == ["1", "2"]


@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
async def test_a_message_sent_through_another_daemon_runs_on_the_lingering_one_at_once(database_url, folder):
    here = make_daemon(database_url, folder, ledger_model(), linger_s=3600, poll_s=3600)
    there = make_daemon(database_url, folder, ledger_model(), linger_s=3600, poll_s=3600)
    scanned = {daemon: spy(daemon)[2] for daemon in (here, there)}
    await here.start()
    await there.start()
    try:
        for daemon in (here, there):  # each start-up scan is over, so only the arrival path can take msg 1
            await scans_over(daemon, scanned[daemon])
        first = await here.submit("alice", "msg 1")
        assert (await here.wait(first.run_id, 60)).state == "done"
        worker = here.dispatcher.workers[first.agent_id]
        # `there` cannot take the agent (here holds its lease); here hears the notice and its worker claims the item
        # (with an hour's linger and poll, nothing else would run it within the wait).
        second = await there.submit("alice", "msg 2")
        done = await there.wait(second.run_id, 60)
        assert done.state == "done" and done.result["reply"] == "ack 2" and done.owner == here.owner
        assert here.dispatcher.workers[first.agent_id] is worker and first.agent_id not in there.dispatcher.workers
    finally:
        await there.stop(grace_s=0)
        await here.stop(grace_s=0)


async def test_the_finish_says_whether_the_agent_has_more_items(database_url, folder):
    daemon = make_daemon(database_url, folder, ledger_model())  # not started: the test claims by hand
    a = await daemon.submit("alice", "msg 1")
    b = await daemon.submit("alice", "msg 2")
    now = utcnow()
    owner, until = daemon.owner, daemon.leases.until(now)
    claimed = await daemon.inbox.claim_next(a.agent_id, owner, until, now)
    assert claimed.run_id == a.run_id and claimed.agent_name == "alice"
    assert (await daemon.inbox.finish(claimed, owner, now, result={"reply": "x"})).more is True
    claimed = await daemon.inbox.claim_next(a.agent_id, owner, until, now)
    assert claimed.run_id == b.run_id
    stored = await daemon.inbox.finish(claimed, owner, now, error="boom")
    assert stored.more is False and stored.state == "failed"
    assert (await daemon.inbox.finish(claimed, owner, now, result={"reply": "late"})).more is None  # finished
    assert await daemon.inbox.claim_next(a.agent_id, owner, until, now) is None
    daemon.store.engine.dispose()


@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
def test_only_an_idle_pooled_connection_is_pinged_and_a_dropped_one_is_replaced(database_url, monkeypatch):
    engine = make_engine(database_url)
    pings = []
    real_ping = engine.dialect.do_ping
    monkeypatch.setattr(engine.dialect, "do_ping", lambda conn: pings.append(1) or real_ping(conn))
    try:
        with engine.connect() as conn:
            pid = conn.execute(sqlalchemy.text("SELECT pg_backend_pid()")).scalar()
        for _ in range(5):  # back in the pool just now: no ping
            with engine.connect() as conn:
                assert conn.execute(sqlalchemy.text("SELECT pg_backend_pid()")).scalar() == pid
        assert pings == []
        admin = sqlalchemy.create_engine(database_url)
        with admin.connect() as conn:  # the server drops the pooled connection while it is idle
            assert conn.execute(sqlalchemy.text("SELECT pg_terminate_backend(:pid)"), {"pid": pid}).scalar()
        admin.dispose()
        monkeypatch.setattr(engine_module, "IDLE_PING_S", 0.0)  # every connection counts as idle now
        with engine.connect() as conn:  # the ping finds it dead; the pool hands out a new one
            assert conn.execute(sqlalchemy.text("SELECT pg_backend_pid()")).scalar() != pid
        assert pings
    finally:
        engine.dispose()


async def test_a_first_attempt_skips_the_key_lookup_and_a_reused_key_still_cannot_double(
    database_url, folder, monkeypatch
):
    from sqlalchemy.exc import IntegrityError

    from pagemind.runtime.loop import run_turn
    from pagemind.runtime.state.store import StateStore

    looked_up: list[str] = []
    real = StateStore.turn_for_key
    monkeypatch.setattr(
        StateStore, "turn_for_key", lambda self, agent_id, key: looked_up.append(key) or real(self, agent_id, key)
    )
    daemon = make_daemon(database_url, folder, ledger_model())
    item = await daemon.submit("alice", "msg 1")
    await daemon.start()
    try:
        done = await daemon.wait(item.run_id, 60, known=item)
        assert done.state == "done" and done.attempts == 1
        assert looked_up == []  # the first attempt's key is new: no lookup
        async with daemon.agent("alice") as agent:
            count = agent.window.store.message_count(agent.record.id)
            with pytest.raises(IntegrityError):  # the same key again, vouched new by mistake: refused, not doubled
                await run_turn(agent, "msg 1", idempotency_key=done.turn_key, new_key=True)
            assert agent.window.store.message_count(agent.record.id) == count
            again = await run_turn(agent, "msg 1", idempotency_key=done.turn_key)  # looked up: the stored turn
            assert again.reply == "ack 1" and looked_up == [done.turn_key]
    finally:
        await daemon.stop()


@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
async def test_a_submission_for_an_agent_held_here_sends_no_notice_and_others_do(database_url, tmp_path):
    """A worker of this daemon on the agent holds its lease, so no other daemon could take the item: the
    submission is not announced (each notice wakes every daemon's listener). Any other submission is."""
    import psycopg

    from pagemind.scheduler.queue.sql import INBOX_CHANNEL
    from pagemind.scheduler.queue.wakeup import read_arrival

    folder = write_agents(tmp_path / "agents", ("alice", "bob"))
    daemon = make_daemon(database_url, folder, ledger_model(), linger_s=3600)
    listener = await psycopg.AsyncConnection.connect(
        database_url.replace("postgresql+psycopg://", "postgresql://"), autocommit=True
    )
    await listener.execute(f"LISTEN {INBOX_CHANNEL}")
    await daemon.start()
    try:
        first = await daemon.submit("alice", "msg 1")  # no worker on alice yet: announced
        assert (await daemon.wait(first.run_id, 60)).state == "done"
        assert daemon.dispatcher.holds(first.agent_id)  # its worker lingers
        second = await daemon.submit("alice", "msg 2")
        assert (await daemon.wait(second.run_id, 60)).state == "done"
        other = await daemon.submit("bob", "msg 1")  # no worker on bob: announced
        assert (await daemon.wait(other.run_id, 60)).state == "done"
        heard = []
        async for notice in listener.notifies(timeout=1.0):
            heard.append(notice.payload)
        assert [read_arrival(payload)[1] for payload in heard] == [first.agent_id, other.agent_id]
    finally:
        await daemon.stop(grace_s=0)
        await listener.close()


async def test_at_most_max_lingering_workers_linger(database_url, tmp_path):
    """Each lingering agent holds its lease and its turn lock (an advisory lock on Postgres, from a lock table
    all daemons share): past `max_lingering`, a worker whose inbox empties gives its agent back at once."""
    folder = write_agents(tmp_path / "agents", ("alice", "bob"))
    daemon = make_daemon(database_url, folder, ledger_model(), linger_s=3600, max_lingering=1)
    await daemon.start()
    try:
        first = await daemon.submit("alice", "msg 1")
        assert (await daemon.wait(first.run_id, 60)).state == "done"
        other = await daemon.submit("bob", "msg 1")
        assert (await daemon.wait(other.run_id, 60)).state == "done"
        ending = daemon.dispatcher.workers.get(other.agent_id)
        if ending is not None:  # bob's worker ends (it may have already): no room to linger
            await asyncio.wait_for(ending.task, 60)
        assert set(daemon.dispatcher.workers) == {first.agent_id}
        assert daemon.leases.holders() == {first.agent_id: daemon.owner}
    finally:
        await daemon.stop(grace_s=0)


async def test_a_message_submitted_while_its_agents_turn_ends_runs_without_waiting_for_a_poll(database_url, folder):
    """A message submitted while its agent's worker runs a turn is stored pending, and the worker learns of it from
    the finish's `more`; when it commits after that statement began, `more` says nothing waits. The submission's
    poke (the worker was busy, not lingering) is kept, so the worker claims again instead of lingering until the
    poll (here an hour) finds the item."""
    gate, entered = asyncio.Event(), asyncio.Event()

    async def held(request):
        if [m["content"] for m in request.messages if m["role"] == "user"][-1] == "msg 1" and not gate.is_set():
            entered.set()
            await gate.wait()
        return ledger_step(request)

    daemon = make_daemon(database_url, folder, FunctionModel(by_purpose(held)), linger_s=3600, poll_s=3600)
    finished = daemon.inbox.finished
    daemon.inbox.finished = lambda item, row: replace(finished(item, row), more=False)  # the late snapshot
    await daemon.start()
    try:
        first = await daemon.submit("alice", "msg 1")
        await asyncio.wait_for(entered.wait(), 60)
        second = await daemon.submit("alice", "msg 2")
        assert second.state == "pending"  # its worker is busy: no claim for it by the insert
        gate.set()
        assert (await daemon.wait(first.run_id, 60)).more is False
        done = await daemon.wait(second.run_id, 30)
        assert (done.state, done.result["reply"]) == ("done", "ack 2")
    finally:
        await daemon.stop(grace_s=30)
