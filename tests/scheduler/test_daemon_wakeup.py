"""Arrivals (issue 12, dequeue latency): a message accepted by the daemon's own process, or announced by a Postgres
notice naming its agent, is taken with its agent's lease in one commit (`scheduler.queue.arrivals`) instead of waiting
for a scan of the inbox. Every daemon here polls once an hour, so a claim that happens at all happened because of
the wake-up, and the spies below tell which path took it."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from pagemind.runtime.process.settings import Settings
from pagemind.runtime.state.records import utcnow
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.models import FunctionModel, by_purpose
from pagemind.scheduler.catalog import AgentCatalog
from pagemind.scheduler.daemon import Daemon
from pagemind.scheduler.daemon_config import DaemonConfig
from pagemind.scheduler.queue.arrivals import Arrivals
from pagemind.scheduler.queue.inbox import Inbox
from pagemind.scheduler.queue.leases import Leases
from pagemind.scheduler.queue.wakeup import arrival_notice, read_arrival
from tests.support.daemon_support import ledger_model, ledger_step, markers, write_agents

HOUR = 3600.0


def make_daemon(url: str, folder: Path, model, **config) -> Daemon:
    settings = Settings.from_env({"PAGEMIND_HOME": str(folder.parent / "home"), "DATABASE_URL": url})
    catalog = AgentCatalog(folder, StateStore.open(settings.database_url))
    return Daemon(catalog, settings, model=model, config=DaemonConfig(**{"poll_s": HOUR, **config}))


def spy(daemon: Daemon) -> tuple[list[str], list[list[int]], asyncio.Event]:
    """Run ids the arrival path claimed, agents each scan took, and an event set at the first scan."""
    by_arrival: list[str] = []
    scans: list[list[int]] = []
    scanned = asyncio.Event()
    claim, claim_agents = daemon.dispatcher.arrivals.claim, daemon.leases.claim_agents

    async def claimed(agent_id, name, now):
        item = await claim(agent_id, name, now)
        if item is not None:
            by_arrival.append(item.run_id)
        return item

    def scan(limit, exclude, now):
        taken = claim_agents(limit, exclude, now)
        scans.append(taken)
        scanned.set()
        return taken

    daemon.dispatcher.arrivals.claim = claimed
    daemon.leases.claim_agents = scan
    return by_arrival, scans, scanned


async def scans_over(daemon: Daemon, scanned: asyncio.Event) -> None:
    """Until the scans a start asks for are over (on Postgres also the one the notices' (re)connect asks for), so
    that what is submitted next can only be taken by its arrival."""
    if daemon.wakeups is not None:
        await daemon.wakeups.listening.wait()
    await scanned.wait()
    if daemon.dispatcher.wake.is_set():  # the scan a (re)connect asks for is still to run: let it run first
        scanned.clear()
        await scanned.wait()


@pytest.fixture
def folder(tmp_path) -> Path:
    return write_agents(tmp_path / "agents", ("alice", "bob"))


async def test_a_message_accepted_in_process_is_claimed_by_its_wakeup_not_a_scan(database_url, folder):
    daemon = make_daemon(database_url, folder, ledger_model())
    by_arrival, scans, scanned = spy(daemon)
    await daemon.start()
    try:
        await scans_over(daemon, scanned)  # the start's scan found nothing: what follows is the arrival's
        items = [await daemon.submit("alice", f"msg {n}") for n in (1, 2, 3)]
        done = [await daemon.wait(item.run_id, timeout=30) for item in items]
    finally:
        await daemon.stop()
    assert [d.state for d in done] == ["done"] * 3 and all(d.attempts == 1 for d in done)
    assert by_arrival[0] == items[0].run_id  # the first took the agent; the worker on it claimed the rest
    assert all(taken == [] for taken in scans)  # no scan ever took the agent
    async with daemon.agent("alice") as agent:
        assert markers(agent.memory.get("human").value) == ["1", "2", "3"]


@pytest.mark.postgres
@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
async def test_a_message_submitted_by_another_process_is_claimed_by_its_notice(database_url, folder):
    """The submitting daemon never starts (an API-only process): only the notice can wake the serving one."""
    serving = make_daemon(database_url, folder, ledger_model())
    client = make_daemon(database_url, folder, ledger_model())
    by_arrival, scans, scanned = spy(serving)
    await serving.start()
    try:
        await scans_over(serving, scanned)
        item = await client.submit("bob", "msg 5")
        done = await serving.wait(item.run_id, timeout=30)
    finally:
        await serving.stop()
    assert done.state == "done" and done.owner == serving.owner and done.result["reply"] == "ack 5"
    assert by_arrival == [item.run_id], scans
    bob = serving.catalog.agent_id("bob")
    assert all(bob not in taken for taken in scans)


@pytest.mark.parametrize("linger_s", [0.0, HOUR])
async def test_an_arrival_with_every_slot_busy_waits_for_the_scan_when_a_worker_ends(database_url, folder, linger_s):
    """With lingering, alice's worker frees the slot when it starts to linger (it may linger for an hour): that
    must wake the scan for bob, as a worker's end does."""
    started, gate = asyncio.Event(), asyncio.Event()

    async def step(request):
        if not started.is_set():  # the first step of all: alice's
            started.set()
            await gate.wait()  # alice's turn holds the only slot until bob's arrival has been looked at
        return ledger_step(request)

    daemon = make_daemon(database_url, folder, FunctionModel(by_purpose(step)), concurrency=1, linger_s=linger_s)
    by_arrival, scans, scanned = spy(daemon)
    looked = asyncio.Event()
    take_arrived = daemon.dispatcher._take_arrived

    async def take(arrived):
        await take_arrived(arrived)
        if any(name == "bob" for name in arrived.values()):
            looked.set()

    daemon.dispatcher._take_arrived = take
    await daemon.start()
    try:
        await scans_over(daemon, scanned)  # else the start's scan may take alice's item before her arrival does
        first = await daemon.submit("alice", "msg 1")
        await started.wait()
        second = await daemon.submit("bob", "msg 2")
        await looked.wait()
        assert daemon.run(second.run_id).state == "pending"  # no slot: left in the inbox
        gate.set()
        done = [await daemon.wait(item.run_id, timeout=30) for item in (first, second)]
    finally:
        await daemon.stop()
    assert [d.state for d in done] == ["done", "done"]
    assert by_arrival == [first.run_id]  # bob was not taken by his arrival ...
    assert [daemon.catalog.agent_id("bob")] in scans  # ... but by the scan when alice's worker ended


async def test_an_arrival_whose_claim_fails_is_left_to_the_scan_and_the_dispatcher_lives_on(database_url, folder):
    daemon = make_daemon(database_url, folder, ledger_model(), poll_s=0.2)  # here the poll is the way back
    failures = []

    async def broken(agent_id, name, now):
        failures.append(agent_id)
        raise RuntimeError("the store went away")

    daemon.dispatcher.arrivals.claim = broken
    await daemon.start()
    try:
        done = await daemon.wait((await daemon.submit("alice", "msg 1")).run_id, timeout=30)
        again = await daemon.wait((await daemon.submit("bob", "msg 2")).run_id, timeout=30)
    finally:
        await daemon.stop()
    assert failures and done.state == again.state == "done" and done.attempts == again.attempts == 1


async def test_claiming_an_arrival_takes_nothing_without_open_work_or_from_a_live_lease(database_url, folder):
    store = StateStore.open(database_url)
    alice = store.ensure_agent(AgentCatalog(folder, store).spec_for("alice")).id
    inbox, now = Inbox(store.engine), utcnow()
    mine, other = Leases(store.engine, "me", 30), Leases(store.engine, "other", 30)
    arrivals = Arrivals(store.engine, mine)
    assert await arrivals.claim(alice, "alice", now) is None  # nothing open: no lease either
    assert mine.holders() == {}
    first, _ = await inbox.submit(alice, "alice", "message", "msg 1", None, now)
    second, _ = await inbox.submit(alice, "alice", "message", "msg 2", None, now)
    assert other.take(alice, now)
    assert await arrivals.claim(alice, "alice", now) is None  # another daemon holds it live: untouched
    assert mine.holders() == {alice: "other"} and inbox.get(first.run_id).state == "pending"
    other.release(alice)
    claimed = await arrivals.claim(alice, "alice", now)
    assert claimed is not None and claimed.run_id == first.run_id  # the oldest open item, not the newest
    assert claimed.state == "running" and claimed.owner == "me" and claimed.attempts == 1
    assert mine.holders() == {alice: "me"} and inbox.get(second.run_id).state == "pending"


def test_a_notice_names_its_agent_and_a_bare_one_asks_for_a_scan():
    assert read_arrival(arrival_notice("host:12:ab", 42, "companion-u1")) == ("host:12:ab", 42, "companion-u1")
    assert read_arrival(arrival_notice("host:12:ab", 42, "x" * 5000)) == ("host:12:ab", 42, None)  # looked up
    assert read_arrival("host:12:ab") == ("host:12:ab", None, None)  # a batch of trigger firings
    assert read_arrival("") == ("", None, None)  # items put back, a reconnect


async def test_giving_back_a_lease_says_whether_work_waits(database_url, folder):
    """`Leases.release_looking`: the release and the look for open items that `Dispatcher._work` makes when an
    agent's inbox ran empty, in one statement; the lease is gone either way, and another owner's stays."""
    store = StateStore.open(database_url)
    alice = store.ensure_agent(AgentCatalog(folder, store).spec_for("alice")).id
    inbox, now = Inbox(store.engine), utcnow()
    mine, other = Leases(store.engine, "me", 30), Leases(store.engine, "other", 30)
    assert mine.take(alice, now) and await mine.release_looking(alice) is False and mine.holders() == {}
    item, _ = await inbox.submit(alice, "alice", "message", "msg 1", None, now)  # came while the agent was leased
    assert mine.take(alice, now) and await mine.release_looking(alice) is True and mine.holders() == {}
    assert other.take(alice, now)
    assert await mine.release_looking(alice) is True and mine.holders() == {alice: "other"}  # not ours: only a look
    await inbox.finish(await inbox.claim_next(alice, "other", other.until(now), now), "other", now, result={})
    assert await other.release_looking(alice) is False and other.holders() == {}
    assert inbox.get(item.run_id).state == "done"


async def test_an_agent_loaded_for_its_item_is_not_read_again_one_loaded_before_is(database_url, folder, monkeypatch):
    """The first item after taking an agent's lock reads again what other processes changed (`Agent.refresh`),
    unless the pool has just loaded the agent for it: that load read everything under the same lock."""
    from pagemind.runtime.agent import Agent

    refreshed: list[str] = []
    refresh = Agent.refresh

    async def counted(agent: Agent) -> None:
        refreshed.append(agent.name)
        await refresh(agent)

    monkeypatch.setattr(Agent, "refresh", counted)
    daemon = make_daemon(database_url, folder, ledger_model(), linger_s=0)
    await daemon.start()
    try:
        first = await daemon.wait((await daemon.submit("alice", "msg 1")).run_id, timeout=30)
        await asyncio.gather(*(w.task for w in daemon.dispatcher.workers.values()))  # the worker gave the agent back
        assert refreshed == []  # loaded for the item: nothing to read again
        second = await daemon.wait((await daemon.submit("alice", "msg 2")).run_id, timeout=30)
    finally:
        await daemon.stop()
    assert first.state == second.state == "done" and refreshed == ["alice"]  # loaded before: read again
