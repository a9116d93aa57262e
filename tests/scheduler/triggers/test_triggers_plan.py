"""The trigger rules (scheduler/triggers/rules.py) under a simulated clock: which firings are due, when, and how often."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from pagemind.runtime.spec.triggers import IdleTrigger, ScheduleTrigger
from pagemind.scheduler.triggers.rules import Firing, latest_occurrence, next_occurrence, plan, wake_at

UTC = UTC
DAY = datetime(2026, 11, 30, tzinfo=UTC)  # a Monday


def at(hour: int, minute: int = 0, second: int = 0, day: int = 0) -> datetime:
    return DAY + timedelta(days=day, hours=hour, minutes=minute, seconds=second)


class Simulation:
    """One agent's triggers and its `trigger_fires` rows, ticked like the daemon does (records applied)."""

    def __init__(self, schedule=(), idle=None, *, started: datetime):
        self.schedule, self.idle, self.started = list(schedule), idle, started
        self.fired: dict[str, datetime] = {}
        self.firings: list[Firing] = []
        self.last_activity: datetime | None = None

    def tick(self, now: datetime) -> list[Firing]:
        result = plan(
            self.schedule, self.idle, self.fired, last_activity=self.last_activity, now=now, started=self.started
        )
        for key, moment in result.records.items():
            self.fired[key] = max(moment, self.fired.get(key, moment))
        for firing in result.firings:
            self.fired[firing.trigger_key] = firing.due
        self.firings += result.firings
        return result.firings

    def run(self, start: datetime, end: datetime, step: timedelta) -> None:
        now = start
        while now <= end:
            self.tick(now)
            now += step


def test_cron_fires_at_its_minutes_across_a_day_and_only_once_each():
    nine = ScheduleTrigger(cron="0 9 * * *", message="good morning")
    quarter = ScheduleTrigger(cron="*/15 13-14 * * *", message="check")
    sim = Simulation([nine, quarter], started=at(0))
    sim.run(at(0), at(0, day=1), timedelta(seconds=20))  # three ticks in every minute
    fired = [(f.content, f.due) for f in sim.firings]
    expected_quarters = [at(h, m) for h in (13, 14) for m in (0, 15, 30, 45)]
    assert fired == [("good morning", at(9))] + [("check", t) for t in expected_quarters]
    assert all(f.kind == "message" and not f.missed for f in sim.firings)
    # ...and the second day's 09:00 comes when its time does
    assert sim.tick(at(8, 59, 59, day=1)) == [] and [f.due for f in sim.tick(at(9, 0, 0, day=1))] == [at(9, day=1)]


def test_cron_is_read_in_its_time_zone():
    berlin = ScheduleTrigger(cron="0 9 * * *", timezone="Europe/Berlin", message="Guten Morgen")
    assert latest_occurrence(berlin, at(8, 30)) == at(8, day=-1) + timedelta(days=1)  # 09:00 CET is 08:00 UTC
    assert next_occurrence(berlin, at(8)) == at(8, day=1)
    summer = datetime(2026, 7, 1, 12, tzinfo=UTC)
    assert latest_occurrence(berlin, summer) == datetime(2026, 7, 1, 7, tzinfo=UTC)  # CEST: UTC+2


def test_every_30m_fires_on_the_half_hours_from_the_epoch():
    every = ScheduleTrigger(every="30m", message="tick")
    sim = Simulation([every], started=at(0))
    sim.run(at(0, 7), at(0, 7, day=1), timedelta(minutes=1))
    dues = [f.due for f in sim.firings]
    assert dues == [at(0, 30) + timedelta(minutes=30 * i) for i in range(48)]  # 00:30 … 24:00, first seen at 00:07
    assert next_occurrence(every, at(10, 29, 59)) == at(10, 30) and next_occurrence(every, at(10, 30)) == at(11)


def test_a_new_trigger_does_not_fire_what_was_due_before_it_was_seen():
    sim = Simulation([ScheduleTrigger(cron="0 9 * * *", message="hi")], started=at(0))
    assert sim.tick(at(15)) == []  # added at 15:00: today's 09:00 is not owed
    assert sim.tick(at(8, 59, day=1)) == [] and len(sim.tick(at(9, day=1))) == 1


def test_idle_fires_once_after_the_quiet_period_and_again_only_after_new_activity():
    idle = IdleTrigger(after="15m", run="compact")
    sim = Simulation(idle=idle, started=at(0))
    sim.run(at(9), at(10), timedelta(minutes=1))
    assert sim.firings == []  # never had a message: nothing to be idle after
    sim.last_activity = at(10, 0, 30)
    sim.run(at(10, 1), at(12), timedelta(seconds=30))
    assert [(f.kind, f.content, f.due) for f in sim.firings] == [("job", "compact", at(10, 15, 30))]
    sim.last_activity = at(12, 0, 10)  # a new message ends a new idle period
    sim.run(at(12, 1), at(13), timedelta(seconds=30))
    assert [f.due for f in sim.firings] == [at(10, 15, 30), at(12, 15, 10)]


def test_a_busy_agent_is_not_idle():
    idle = IdleTrigger(after="15m", run="compact")
    # while a message is pending or running, last_activity is `now`: the idle time never comes
    for minute in range(0, 120):
        now = at(9, minute)
        assert plan([], idle, {}, last_activity=now, now=now, started=at(0)).firings == []


def test_missed_firings_fire_once_at_start_the_most_recent_one():
    trigger = ScheduleTrigger(cron="0 9 * * *", message="daily")
    sim = Simulation([trigger], started=at(0))
    sim.tick(at(8))
    assert len(sim.tick(at(9))) == 1
    # the daemon is down from Monday 10:00 until Thursday 12:00: Tue, Wed and Thu 09:00 were missed
    sim.started = at(12, day=3)
    firings = sim.tick(at(12, day=3))
    assert [(f.due, f.missed) for f in firings] == [(at(9, day=3), True)]
    assert sim.tick(at(12, 1, day=3)) == []
    assert [(f.due, f.missed) for f in sim.tick(at(9, day=4))] == [(at(9, day=4), False)]


def test_missed_skip_records_without_firing():
    trigger = ScheduleTrigger(cron="0 9 * * *", message="daily", missed="skip")
    sim = Simulation([trigger], started=at(0))
    sim.tick(at(8))
    sim.started = at(12, day=3)
    assert sim.tick(at(12, day=3)) == [] and sim.fired[trigger.key] == at(9, day=3)
    assert len(sim.tick(at(9, day=4))) == 1
    idle = IdleTrigger(after="15m", run="compact", missed="skip")
    skipped = plan([], idle, {}, last_activity=at(9), now=at(12), started=at(11))
    assert skipped.firings == [] and skipped.records == {idle.key: at(9, 15)}
    fired = plan([], IdleTrigger(after="15m", run="compact"), {}, last_activity=at(9), now=at(12), started=at(11))
    assert [(f.due, f.missed) for f in fired.firings] == [(at(9, 15), True)]


def test_occurrences_passed_between_two_ticks_fire_once_not_in_a_burst():
    every = ScheduleTrigger(every="1m", message="m")
    sim = Simulation([every], started=at(0))
    sim.tick(at(9))
    assert [f.due for f in sim.tick(at(9, 10, 30))] == [at(9, 10)]  # the loop stalled ten minutes: one firing


def test_idempotency_keys_name_the_trigger_and_the_due_time():
    trigger = ScheduleTrigger(cron="0 9 * * *", message="daily")
    firing = plan(
        [trigger], None, {trigger.key: at(9, day=-1)}, last_activity=None, now=at(9, 0, 5), started=at(0)
    ).firings[0]
    assert firing.idempotency_key == f"trigger:{trigger.key}:2026-11-30T09:00:00+00:00"
    naive = plan(
        [trigger],
        None,
        {trigger.key: at(9, day=-1).replace(tzinfo=None)},
        last_activity=None,
        now=at(9, 0, 5),
        started=at(0),
    ).firings[0]
    assert naive.idempotency_key == firing.idempotency_key  # SQLite's naive datetimes are UTC


def test_next_due_is_the_earliest_time_and_the_loop_never_sleeps_past_the_cap():
    daily = ScheduleTrigger(cron="0 9 * * *", message="d")
    idle = IdleTrigger(after="15m", run="compact")
    result = plan([daily], idle, {daily.key: at(9, day=-1)}, last_activity=at(8, 50), now=at(8, 55), started=at(0))
    assert result.next_due == at(9)  # before the idle time, 09:05
    result = plan([daily], idle, {daily.key: at(9)}, last_activity=at(9, 50), now=at(9, 55), started=at(0))
    assert result.next_due == at(10, 5)
    assert wake_at([result], at(9, 55), timedelta(seconds=30)) == at(9, 55, 30)
    assert wake_at([result], at(9, 55), timedelta(hours=1)) == at(10, 5)
    assert wake_at([], at(9, 55), timedelta(seconds=30)) == at(9, 55, 30)


@pytest.mark.parametrize("now", [at(9, 0, 0), at(9, 0, 0) + timedelta(microseconds=1), at(9, 0, 59)])
def test_an_occurrence_at_now_counts_as_due(now):
    assert latest_occurrence(ScheduleTrigger(cron="0 9 * * *", message="x"), now) == at(9)
