"""Triggers in the daemon: firings land in the inbox at the right times under a controlled clock (no real sleeps),
once each across restarts and across two daemons on one database, and the idle `compact` job really flushes."""

from __future__ import annotations

import asyncio
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from pagemind.runtime.process.settings import Settings
from pagemind.runtime.spec.loading import load_spec
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.clock import ManualClock
from pagemind.runtime.testing.models import FunctionModel, by_purpose
from pagemind.runtime.testing.responses import tool_call_body
from pagemind.runtime.testing.specs import spec_data
from pagemind.scheduler.catalog import AgentCatalog
from pagemind.scheduler.daemon import Daemon

UTC = UTC
MONDAY = datetime(2026, 11, 30, tzinfo=UTC)


def at(hour: int, minute: int = 0, second: int = 0, day: int = 0) -> datetime:
    return MONDAY + timedelta(days=day, hours=hour, minutes=minute, seconds=second)


def write_agent(folder: Path, name: str, **fields: Any) -> Path:
    path = folder / f"{name}.yaml"
    path.write_text(yaml.safe_dump(spec_data(name, **fields), sort_keys=False))
    load_spec(path)  # the test's own YAML must be valid
    return path


def replies(request) -> dict:
    return tool_call_body("send_message", {"message": "noted"})


@pytest.fixture
def agents_dir(tmp_path) -> Path:
    folder = tmp_path / "agents"
    folder.mkdir()
    return folder


@pytest.fixture
def make_daemon(database_url, agents_dir, tmp_path):
    made: list[Daemon] = []

    def make(clock: ManualClock, model: Any = None) -> Daemon:
        store = StateStore(make_engine(database_url))
        settings = Settings(home=tmp_path / "home", database_url=database_url)
        daemon = Daemon(
            AgentCatalog(agents_dir, store), settings, clock=clock, model=model or FunctionModel(by_purpose(replies))
        )
        made.append(daemon)
        return daemon

    yield make
    for daemon in made:
        daemon.store.engine.dispose()


def items(daemon: Daemon, name: str) -> list:
    return daemon.inbox.items(daemon.catalog.agent_id(name))


async def test_cron_and_every_fire_at_their_minutes_across_a_day(make_daemon, agents_dir):
    write_agent(
        agents_dir,
        "morning",
        schedule=[{"cron": "0 9 * * *", "message": "Good morning"}, {"every": "6h", "run": "compact"}],
    )
    clock = ManualClock(at(0, 0, 30))
    daemon = make_daemon(clock)
    now = clock()
    while now <= at(0, 0, 30, day=1):  # a tick every five minutes for a day (the rules' own test ticks each 20 s)
        await daemon.tick(now)
        now = clock.advance(minutes=5)
    got = [(i.kind, i.content, i.idempotency_key.split(":", 2)[2]) for i in items(daemon, "morning")]
    assert got == [
        ("job", "compact", "2026-11-30T06:00:00+00:00"),
        ("message", "Good morning", "2026-11-30T09:00:00+00:00"),
        ("job", "compact", "2026-11-30T12:00:00+00:00"),
        ("job", "compact", "2026-11-30T18:00:00+00:00"),
        ("job", "compact", "2026-12-01T00:00:00+00:00"),
    ]
    assert all(i.idempotency_key.startswith("trigger:") for i in items(daemon, "morning"))


async def test_the_loop_sleeps_until_each_due_time_and_ticks_exactly_then(make_daemon, agents_dir):
    write_agent(
        agents_dir,
        "pinger",
        schedule=[{"every": "30m", "message": "ping"}, {"cron": "17 10 * * *", "message": "ten seventeen"}],
    )
    clock = ManualClock(at(9, 5))
    daemon = make_daemon(clock)
    submitted: list[tuple[datetime, str]] = []
    submit = daemon.triggers.submit

    async def recording_submit(batch):
        submitted.extend((clock(), firing.content) for _, firing in batch)
        return await submit(batch)

    daemon.triggers.submit = recording_submit  # type: ignore[method-assign]
    slept: list[float] = []

    class Done(Exception):
        pass

    async def fake_sleep(seconds: float) -> None:  # virtual time: the clock moves by what the loop asked for
        slept.append(seconds)
        if clock.advance(seconds=seconds) > at(11, 1):
            raise Done

    daemon.started = True  # the loop runs while its daemon does (the dispatcher is not needed here)
    with pytest.raises(Done):
        await daemon.triggers.run(clock, sleep=fake_sleep)
    assert submitted == [
        (at(9, 30), "ping"),
        (at(10), "ping"),
        (at(10, 17), "ten seventeen"),
        (at(10, 30), "ping"),
        (at(11), "ping"),
    ]
    assert max(slept) <= daemon.triggers.max_sleep.total_seconds()
    assert len(slept) < 2 * 120 + 10  # about one wake-up per cap (30 s) and per firing, not a busy loop


async def test_missed_firings_after_a_restart_fire_once_or_are_skipped(make_daemon, agents_dir):
    write_agent(
        agents_dir,
        "daily",
        schedule=[
            {"cron": "0 9 * * *", "message": "once"},
            {"cron": "30 9 * * *", "message": "skipped", "missed": "skip"},
        ],
    )
    clock = ManualClock(at(8))
    first = make_daemon(clock)
    await first.tick(at(8))
    await first.tick(at(9, 30))
    assert [i.content for i in items(first, "daily")] == ["once", "skipped"]
    # down from Monday 09:31 to Thursday 12:00; a new daemon over the same database
    clock.now = at(12, day=3)
    second = make_daemon(clock)
    await second.tick(clock())
    await second.tick(clock.advance(minutes=1))
    contents = [(i.content, i.idempotency_key.split(":", 2)[2]) for i in items(second, "daily")]
    assert contents == [
        ("once", "2026-11-30T09:00:00+00:00"),
        ("skipped", "2026-11-30T09:30:00+00:00"),
        ("once", "2026-12-03T09:00:00+00:00"),
    ]  # Thursday's 09:00 once; Tue/Wed dropped
    await second.tick(at(9, 30, day=4))
    assert [i.content for i in items(second, "daily")][-2:] == ["once", "skipped"]  # Friday: both, on time


async def test_two_daemons_deciding_the_same_firing_make_one_inbox_item(make_daemon, agents_dir):
    write_agent(agents_dir, "shared", schedule=[{"every": "30m", "message": "half hour"}])
    clock = ManualClock(at(9, 1))
    one, two = make_daemon(clock), make_daemon(clock)
    await one.tick(at(9, 1))  # first sighting
    both_decided = asyncio.Event()
    waiting = 0

    def held(daemon: Daemon):
        submit = daemon.triggers.submit

        async def submit_after_both_decided(batch):
            nonlocal waiting
            waiting += 1
            if waiting == 2:
                both_decided.set()
            await both_decided.wait()  # neither has recorded the firing: both decided it
            return await submit(batch)

        daemon.triggers.submit = submit_after_both_decided  # type: ignore[method-assign]

    held(one), held(two)
    await asyncio.wait_for(asyncio.gather(one.tick(at(9, 30)), two.tick(at(9, 30))), 30)
    assert waiting == 2
    assert [i.content for i in items(one, "shared")] == ["half hour"]
    assert one.triggers.fired_count == two.triggers.fired_count == 1


def test_two_daemons_in_two_threads_ticking_a_day_fire_each_time_once(make_daemon, agents_dir):
    write_agent(agents_dir, "raced", schedule=[{"every": "30m", "message": "half hour"}])
    clock = ManualClock(at(0, 0, 10))
    daemons = [make_daemon(clock), make_daemon(clock)]
    asyncio.run(daemons[0].tick(at(0, 0, 10)))  # first sighting
    times = [at(0, 30 * i, 1) for i in range(1, 49)]
    barrier = threading.Barrier(2, timeout=60)
    errors: list[BaseException] = []

    def ticker(daemon: Daemon) -> None:
        try:
            for moment in times:
                barrier.wait()  # both tick the same moment together
                asyncio.run(daemon.tick(moment))
        except BaseException as exc:
            errors.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=ticker, args=(d,)) for d in daemons]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors, errors
    dues = [i.idempotency_key.split(":", 2)[2] for i in items(daemons[0], "raced")]
    assert dues == [(at(0, 30 * i)).isoformat() for i in range(1, 49)]  # every half hour once, none twice
    assert sum(d.triggers.fired_count for d in daemons) >= 48


async def test_idle_compact_fires_once_per_quiet_period_and_flushes(make_daemon, agents_dir):
    write_agent(agents_dir, "quiet", idle={"after": "15m", "run": "compact"})
    clock = ManualClock(datetime.now(UTC))  # the inbox stamps times by the wall clock
    daemon = make_daemon(clock)
    await daemon.start()
    try:
        for text in ("I got the job!", "It starts Monday."):
            item = await daemon.submit("quiet", text)
            assert (await daemon.wait(item.run_id, 30)).state == "done"
        start = clock()
        for minutes in (1, 10, 14):
            clock.now = start + timedelta(minutes=minutes)
            await daemon.tick(clock())
        assert [i.kind for i in items(daemon, "quiet")] == ["message", "message"]
        clock.now = start + timedelta(minutes=16)
        await daemon.tick(clock())
        job = items(daemon, "quiet")[-1]
        assert (job.kind, job.content) == ("job", "compact")
        done = await daemon.wait(job.run_id, 30)
        assert done.state == "done" and done.result["evicted"] > 0, done
        for minutes in (17, 40, 300):  # still idle, and the compact job is not activity: no second firing
            clock.now = start + timedelta(minutes=minutes)
            await daemon.tick(clock())
        assert [i.kind for i in items(daemon, "quiet")] == ["message", "message", "job"]
        item = await daemon.submit("quiet", "Back again.")  # new activity: a new quiet period
        assert (await daemon.wait(item.run_id, 30)).state == "done"
        clock.now = datetime.now(UTC) + timedelta(minutes=16)
        await daemon.tick(clock())
        assert [i.kind for i in items(daemon, "quiet")] == ["message", "message", "job", "message", "job"]
    finally:
        await daemon.stop()


async def test_agents_made_from_a_template_get_its_triggers(make_daemon, agents_dir):
    write_agent(agents_dir, "companion", template=True, schedule=[{"cron": "0 9 * * *", "message": "Morning!"}])
    clock = ManualClock(at(8))
    daemon = make_daemon(clock)
    for user in ("u1", "u2"):
        daemon.create_agent(f"companion-{user}", template="companion")
    await daemon.tick(at(8))
    await daemon.tick(at(9))
    assert [i.content for i in items(daemon, "companion-u1")] == ["Morning!"]
    assert [i.content for i in items(daemon, "companion-u2")] == ["Morning!"]


class VirtualSleep:
    """The trigger loop's sleep, held until the test lets it go (after moving the clock by what it asked for)."""

    def __init__(self) -> None:
        self.requests: asyncio.Queue = asyncio.Queue()

    async def __call__(self, seconds: float) -> None:
        woken = asyncio.get_running_loop().create_future()
        await self.requests.put((seconds, woken))
        await woken

    async def next(self) -> tuple[float, asyncio.Future]:
        return await asyncio.wait_for(self.requests.get(), 30)


async def test_a_started_daemon_fires_on_its_own_and_runs_the_turn(make_daemon, agents_dir):
    write_agent(agents_dir, "alarm", schedule=[{"cron": "0 7 * * *", "message": "Wake up!"}])
    clock = ManualClock(at(6, 59, 40))
    daemon = make_daemon(clock)
    daemon.triggers.sleep = sleep = VirtualSleep()
    await daemon.start()
    try:
        seconds, woken = await sleep.next()  # the first tick recorded the trigger and asked to sleep until 07:00
        assert seconds == 20 and items(daemon, "alarm") == []
        clock.advance(seconds=seconds)
        woken.set_result(None)
        seconds, woken = await sleep.next()  # 07:00: fired, then asleep again (for at most the cap)
        assert seconds == daemon.triggers.max_sleep.total_seconds()
        [item] = items(daemon, "alarm")
        assert (item.kind, item.content) == ("message", "Wake up!")
        done = await daemon.wait(item.run_id, 30)
        assert done.state == "done" and done.result["reply"] == "noted"
    finally:
        await daemon.stop()


async def test_a_stopping_daemon_fires_nothing_more(make_daemon, agents_dir):
    write_agent(agents_dir, "alarm", schedule=[{"cron": "0 7 * * *", "message": "Wake up!"}])
    clock = ManualClock(at(6, 59, 40))
    daemon = make_daemon(clock)
    daemon.triggers.sleep = sleep = VirtualSleep()
    await daemon.start()
    try:
        seconds, woken = await sleep.next()
        [loop] = [t for t in asyncio.all_tasks() if t.get_name() == "pagemind-triggers"]
        daemon.started = False  # what `stop` does first, before it drains the work in flight
        clock.advance(seconds=seconds)
        woken.set_result(None)  # 07:00 comes while the daemon drains
        await asyncio.wait_for(loop, 30)  # the loop ends by itself, without ticking
        assert items(daemon, "alarm") == []
    finally:
        daemon.started = True
        await daemon.stop()


async def test_a_users_firings_stop_at_its_turns_in_flight_and_the_folders_agents_are_not_counted(
    make_daemon, agents_dir
):
    """Issue 34, item 9: a user's agents cannot spend past `key_turns_in_flight` with their triggers either (the API
    answers that user's messages 429 there); firings past it are dropped as missed ones are."""
    from pagemind.runtime.spec.loading import parse_spec

    write_agent(agents_dir, "folder", schedule=[{"every": "15m", "message": "tick"}])
    clock = ManualClock(at(9, 0, 30))
    daemon = make_daemon(clock)
    daemon.triggers.turns_per_owner = 1
    for name in ("mine-a", "mine-b"):
        spec = parse_spec(yaml.safe_dump(spec_data(name, schedule=[{"every": "15m", "message": "tick"}])), "<t>")
        daemon.create_agent(name, spec=spec, owner="u1")
    now = clock()
    while now <= at(10, 0, 30):  # nothing runs them (the daemon is not started): items stay open
        await daemon.tick(now)
        now = clock.advance(minutes=5)
    mine = items(daemon, "mine-a") + items(daemon, "mine-b")
    assert len(mine) == 1  # the user's first firing; every later one found the user's turn in flight
    assert len(items(daemon, "folder")) == 4  # 09:15, 09:30, 09:45, 10:00: nobody's agent, not counted
