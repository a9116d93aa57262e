"""A message for an agent whose worker lingers here goes to that worker, which runs it (no lease or lock to take
again): with `hand_off` the insert claims it for the worker, with the turn's user message; off, the worker is woken
and claims it. An older open item of the agent still runs first; a key used before wakes nothing to run; workers
woken together run within `concurrency`."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from pagemind.runtime.testing.models import FunctionModel, by_purpose
from tests.scheduler.test_daemon_core import make_daemon
from tests.support.daemon_support import ledger_model, ledger_step, markers, write_agents


@pytest.fixture
def folder(tmp_path) -> Path:
    return write_agents(tmp_path / "agents")


def lingering_daemon(database_url: str, folder: Path, hand_off: bool = True):
    """A daemon whose workers linger an hour (and that polls as rarely): only a submission wakes them."""
    return make_daemon(database_url, folder, ledger_model(), linger_s=3600, poll_s=3600, hand_off=hand_off)


async def first_turn(daemon, name: str = "alice", **submit):
    """Submit a first message and wait for it: afterwards the agent's worker lingers."""
    first = await daemon.submit(name, "msg 1", **submit)
    assert (await daemon.wait(first.run_id, 60)).state == "done"
    return first


def count_claims(daemon) -> list[int]:
    """Record the agent of every `claim_next` the daemon's workers make."""
    claims: list[int] = []
    real = daemon.inbox.claim_next

    async def claim_next(agent_id, *args):
        claims.append(agent_id)
        return await real(agent_id, *args)

    daemon.inbox.claim_next = claim_next
    return claims


def count_accepts(daemon) -> list[tuple[str, bool]]:
    """Record every turn's user message stored (its text, and whether it rode on its inbox item's insert)."""
    accepts: list[tuple[str, bool]] = []
    real = daemon.store.accept_message

    async def accept_message(agent_id, message, key=None, **linked):
        accepts.append((message.content, "after" in linked))
        return await real(agent_id, message, key, **linked)

    daemon.store.accept_message = accept_message
    return accepts


@pytest.mark.parametrize("hand_off", [True, False])
async def test_a_message_for_a_lingering_worker_is_run_by_that_worker_once(database_url, folder, hand_off):
    daemon = lingering_daemon(database_url, folder, hand_off)
    await daemon.start()
    try:
        first = await first_turn(daemon)
        claims, accepts = count_claims(daemon), count_accepts(daemon)
        worker = daemon.dispatcher.workers[first.agent_id]
        second = await daemon.submit("alice", "msg 2")
        # On: claimed for the worker by its insert (one attempt); off: stored as any other, the worker woken.
        assert (second.state, second.attempts) == (("running", 1) if hand_off else ("pending", 0))
        done = await daemon.wait(second.run_id, 60)
        assert done.state == "done" and done.result["reply"] == "ack 2" and done.attempts == 1
        assert daemon.dispatcher.workers[first.agent_id] is worker  # the lingering worker ran it
        # Off: one claim; its finish said nothing else waits, so the worker lingers again without an empty claim.
        assert claims == ([] if hand_off else [first.agent_id])
        assert accepts == [("msg 2", hand_off)]  # the user message stored once, with its item or by its turn
    finally:
        await daemon.stop(grace_s=0)
    async with daemon.agent("alice") as agent:
        assert markers(agent.memory.get("human").value) == ["1", "2"]
        users = [m.content for m in agent.store.all_messages(agent.record.id) if m.role == "user"]
        assert users == ["msg 1", "msg 2"]


async def test_an_older_open_item_of_the_agent_runs_first(database_url, folder):
    daemon = lingering_daemon(database_url, folder)
    await daemon.start()
    try:
        first = await first_turn(daemon)
        # An item the worker has not heard of (as another daemon's submission whose notice is still on its way).
        older, _ = await daemon.inbox.submit(
            first.agent_id, "alice", "message", "msg 2", None, first.created_at, announce=False
        )
        newer = await daemon.submit("alice", "msg 3")
        assert newer.state == "pending" and newer.attempts == 0  # not claimed past the older one
        a, b = await daemon.wait(older.run_id, 60), await daemon.wait(newer.run_id, 60)
        assert a.state == b.state == "done" and a.finished_at <= b.started_at
    finally:
        await daemon.stop(grace_s=0)
    async with daemon.agent("alice") as agent:
        assert markers(agent.memory.get("human").value) == ["1", "2", "3"]


async def test_a_key_used_before_runs_nothing_and_the_worker_lingers_on(database_url, folder):
    daemon = lingering_daemon(database_url, folder)
    await daemon.start()
    try:
        first = await first_turn(daemon, idempotency_key="k1")
        worker = daemon.dispatcher.workers[first.agent_id]
        again = await daemon.submit("alice", "msg 1", idempotency_key="k1")
        assert again.run_id == first.run_id and again.state == "done"
        second = await daemon.submit("alice", "msg 2")  # the worker claims it (it may be lingering again already)
        done = await daemon.wait(second.run_id, 60)
        assert done.state == "done" and done.result["reply"] == "ack 2" and done.attempts == 1
        assert daemon.dispatcher.workers[first.agent_id] is worker
    finally:
        await daemon.stop(grace_s=0)


async def test_lingering_workers_woken_together_run_within_concurrency(database_url, tmp_path):
    """Up to `max_loaded` workers linger, more than `concurrency`: woken at once, they still run at most
    `concurrency` turns at a time, and every one of them runs its item."""
    names = ("alice", "bob", "carol", "dave")
    folder = write_agents(tmp_path / "agents", names)
    in_flight, most = 0, 0

    async def step(request):
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        for _ in range(50):
            await asyncio.sleep(0)  # let another turn run here, if the daemon allowed one
        in_flight -= 1
        return ledger_step(request)

    daemon = make_daemon(
        database_url, folder, FunctionModel(by_purpose(step)), concurrency=2, linger_s=3600, poll_s=3600
    )
    await daemon.start()
    try:
        for name in names:  # one after the other: each worker then lingers
            await first_turn(daemon, name)
        assert len(daemon.dispatcher.workers) == len(names)
        most = 0
        second = await asyncio.gather(*(daemon.submit(name, "msg 2") for name in names))
        done = [await daemon.wait(item.run_id, 60) for item in second]
        assert [item.state for item in done] == ["done"] * len(names)
        assert most <= 2
    finally:
        await daemon.stop(grace_s=0)
