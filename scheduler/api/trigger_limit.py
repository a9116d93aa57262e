"""How often an agent posted to the API may wake itself: its schedule triggers, taken together, must leave at least
`DaemonConfig.min_api_trigger_s` (default 15 minutes) between any two firings, else every firing is a model call
nobody asked for, on the daemon's key (issue 34, item 9). The served folder's agents are the operator's, and free.

The gap is found by listing the firings of the next `HORIZON` (cron times in their time zone, `every` from the
epoch as the rules count them): a schedule with more firings than the horizon holds at the minimum gap has a
shorter one (pigeonhole), so listing stops there.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pagemind.runtime.spec.triggers import ScheduleTrigger

HORIZON = timedelta(days=8)  # over a week: a weekday's cron is seen on every day it names
START = datetime(2026, 1, 5, tzinfo=UTC)  # a fixed Monday: the same answer on every run


def shortest_gap(schedule: list[ScheduleTrigger], at_least: timedelta) -> timedelta | None:
    """The shortest time between two firings of `schedule` (two at one time: zero), or None when it has fewer than
    two firings in the horizon; any gap found under `at_least` may be returned in place of the very shortest."""
    most = min(int(HORIZON / at_least) + 2, 20_000) if at_least > timedelta(0) else 20_000
    times: list[datetime] = []
    for trigger in schedule:
        times.extend(_firings(trigger, most))
        if len(times) > most:  # more firings than the horizon holds at `at_least` apart: some gap is shorter
            break
    times.sort()
    gaps = [later - earlier for earlier, later in zip(times, times[1:], strict=False)]
    return min(gaps) if gaps else None


def _firings(trigger: ScheduleTrigger, most: int) -> list[datetime]:
    end = START + HORIZON
    if trigger.cron is None:
        period = trigger.period
        first = datetime.fromtimestamp(0, UTC) + period * ((START - datetime.fromtimestamp(0, UTC)) // period + 1)
        return [first + period * n for n in range(min(most + 1, int((end - first) / period) + 1))]
    from croniter import croniter

    cron = croniter(str(trigger.cron), START.astimezone(trigger.zone))
    times: list[datetime] = []
    while len(times) <= most:
        fire = cron.get_next(datetime)
        if fire > end:
            break
        times.append(fire.astimezone(UTC))
    return times


def too_frequent(schedule: list[ScheduleTrigger], min_interval_s: float) -> str | None:
    """Why a posted agent's schedule fires too often (one line for the 422), or None when it may."""
    if min_interval_s <= 0 or not schedule:
        return None
    at_least = timedelta(seconds=min_interval_s)
    gap = shortest_gap(schedule, at_least)
    if gap is None or gap >= at_least:
        return None
    return (
        f"schedule: its triggers fire {_minutes(gap)} apart at the closest, and an agent posted to the API may wake "
        f"itself at most once every {_minutes(at_least)} (min_api_trigger_s); put an agent that needs more in the "
        "served folder"
    )


def _minutes(span: timedelta) -> str:
    minutes = span.total_seconds() / 60
    return f"{minutes:g} minute{'' if minutes == 1 else 's'}"
