"""When an agent's triggers fire: pure, clock-driven decisions (no I/O), so every rule is testable to the second.

Inputs: the agent's triggers (from its YAML), what `trigger_fires` holds for it (per trigger key, the due time of
the last firing handled), when its last message ended (or that it is busy), the time now and when this daemon
process started. Output: a `Plan` — which firings to submit, which trigger times to record without firing, and
when the next one is due (the tick loop sleeps until then).

The rules:
- A firing's identity is its trigger's key and its due time; it is submitted with the idempotency key
  `trigger:<key>:<due, ISO 8601 UTC>`, so two daemon processes deciding the same firing, or a process redoing a
  tick after a crash, put one item in the inbox.
- A schedule trigger seen for the first time records `now` and fires from its next occurrence on: adding a
  `cron: "0 9 * * *"` at 15:00 does not fire today's 09:00.
- At most one firing per trigger per tick: if several occurrences passed since the last one handled, the most
  recent fires and the older ones are dropped (never a burst).
- Missed firings — due before this daemon process started, when no daemon ran — follow the trigger's `missed`:
  `once` (default) fires the most recent one once, at start; `skip` records it without firing.
- Idle fires once per idle period, due at the last message's end + `after`; a message (not one an idle trigger
  sent itself, nor a job) starts a new period. A busy agent (a message pending or running) is not idle.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from croniter import croniter

from pagemind.runtime.spec.triggers import IdleTrigger, ScheduleTrigger

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
IDLE_KEY_PREFIX = "idle-"


def as_utc(moment: datetime) -> datetime:
    """An aware UTC datetime; a naive one (SQLite returns them) is taken as UTC."""
    if moment.tzinfo is UTC:  # the usual case, and called for every trigger of every agent each tick
        return moment
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def idempotency_key(trigger_key: str, due: datetime) -> str:
    """The inbox key of one firing: the same for every process that decides it."""
    return f"trigger:{trigger_key}:{as_utc(due).isoformat()}"


def fired_by_idle(item: Any) -> bool:
    """Whether an inbox item (anything with `idempotency_key`) is an idle trigger's firing: the agent fell quiet."""
    return (item.idempotency_key or "").startswith(f"trigger:{IDLE_KEY_PREFIX}")


# A cron's times around `now`, per trigger key: agents made from one template share their triggers, and croniter
# costs about a millisecond a call, so 10,000 agents ticking would otherwise spend seconds per tick.
_windows: dict[str, tuple[datetime, datetime]] = {}
_WINDOWS_MAX = 4096


def _cron_window(trigger: ScheduleTrigger, now: datetime) -> tuple[datetime, datetime]:
    key = trigger.key
    window = _windows.get(key)
    if window is not None and window[0] <= now < window[1]:
        return window
    # get_next then get_prev: the occurrence at or before `now` (get_prev alone skips one that equals `now`).
    times = croniter(str(trigger.cron), now.astimezone(trigger.zone))
    upcoming = as_utc(times.get_next(datetime))
    window = (as_utc(times.get_prev(datetime)), upcoming)
    if len(_windows) >= _WINDOWS_MAX:
        _windows.clear()
    _windows[key] = window
    return window


def latest_occurrence(trigger: ScheduleTrigger, now: datetime) -> datetime:
    """The schedule's most recent time at or before `now` (UTC)."""
    now = as_utc(now)
    if trigger.cron is None:
        period = trigger.period
        return EPOCH + period * ((now - EPOCH) // period)
    return _cron_window(trigger, now)[0]


def next_occurrence(trigger: ScheduleTrigger, now: datetime) -> datetime:
    """The schedule's first time strictly after `now` (UTC)."""
    now = as_utc(now)
    if trigger.cron is None:
        return latest_occurrence(trigger, now) + trigger.period
    return _cron_window(trigger, now)[1]


@dataclass(frozen=True)
class Firing:
    """One firing to submit to the agent's inbox (kind `message` with its text, or `job` with the job's name)."""

    trigger_key: str
    due: datetime
    kind: str
    content: str
    missed: bool = False  # due before this daemon started (fired once at start by the `once` policy)

    @property
    def idempotency_key(self) -> str:
        """`trigger:<key>:<due>` — one inbox item per firing, whoever submits it and however often."""
        return idempotency_key(self.trigger_key, self.due)


@dataclass
class Plan:
    """A tick's decisions for one agent: submit `firings` (then record each), record `records` without firing
    (a first sighting, a skipped missed firing), and wake again at `next_due`."""

    firings: list[Firing] = field(default_factory=list)
    records: dict[str, datetime] = field(default_factory=dict)
    next_due: datetime | None = None

    def _wake_at(self, moment: datetime | None) -> None:
        if moment is not None and (self.next_due is None or moment < self.next_due):
            self.next_due = moment


def plan(
    schedule: list[ScheduleTrigger],
    idle: IdleTrigger | None,
    fired: Mapping[str, datetime],
    *,
    last_activity: datetime | None,
    now: datetime,
    started: datetime,
) -> Plan:
    """What is due for one agent at `now` (see the module's rules); `fired` maps trigger keys to the due time of
    the last firing handled, `last_activity` is when the last message ended (`now` while one is pending or
    running; None if the agent never had one)."""
    now, started = as_utc(now), as_utc(started)
    result = Plan()
    for trigger in schedule:
        key = trigger.key
        result._wake_at(next_occurrence(trigger, now))
        last = fired.get(key)
        if last is None:  # first sighting: only what comes after now
            result.records[key] = now
            continue
        due = latest_occurrence(trigger, now)
        if due <= as_utc(last):
            continue
        _decide(result, key, trigger, due, started)
    if idle is not None and last_activity is not None:
        due = as_utc(last_activity) + idle.delay
        last = fired.get(idle.key)
        if due > now:
            result._wake_at(due)
        elif last is None or as_utc(last) < due:
            _decide(result, idle.key, idle, due, started)
    return result


def _decide(result: Plan, key: str, trigger: ScheduleTrigger | IdleTrigger, due: datetime, started: datetime) -> None:
    missed = due < started
    if missed and trigger.missed == "skip":
        result.records[key] = due
    else:
        result.firings.append(Firing(key, due, trigger.kind, trigger.content, missed=missed))


def wake_at(plans: list[Plan], now: datetime, max_sleep: timedelta) -> datetime:
    """When the tick loop should run next: the earliest due time of all plans, but no later than `now + max_sleep`
    (new agents, new messages and edited YAML are noticed within that)."""
    latest = as_utc(now) + max_sleep
    dues = [p.next_due for p in plans if p.next_due is not None]
    return min([latest, *dues])
