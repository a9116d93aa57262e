"""The days an agent was in use: what disuse of its memories is counted in (`memory.decay`).

An active day is a UTC date on which the agent received a user message (`messages`, role `user`). Disuse counts
active days, not calendar days: an agent nobody talks to does not forget, and a user coming back after four
months finds what was there when they left; an agent in daily use sees no difference from calendar days.

`ActiveDays` keeps one agent's list in memory: the first read loads the dates of its user messages once, later
reads fetch only messages with a higher id (two index seeks on `ix_messages_agent_context`), and none at all once
the current date is known to be active (nothing written later can change the days up to today). Messages stored
afterwards with an earlier date (an import of an old conversation) are seen at the next date change.
"""

from __future__ import annotations

import bisect
import math
import threading
from dataclasses import dataclass
from datetime import UTC, date, datetime, time

from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlmodel import col

from pagemind.runtime.state.records import aware
from pagemind.runtime.state.tables.conversation import MessageRow


def _day(moment: datetime) -> date:
    return aware(moment).astimezone(UTC).date()


@dataclass(frozen=True)
class Activity:
    """The agent's active days up to `today` (sorted, oldest first), as of one read."""

    days: tuple[date, ...]
    today: date

    def idle(self, last_used: datetime) -> int:
        """Active days after the date of `last_used`, up to today: how long a memory has gone unused."""
        return len(self.days) - bisect.bisect_right(self.days, _day(last_used))

    def used_since(self, idle_days: float) -> datetime | None:
        """The earliest last use that keeps a memory within `idle_days` active days of disuse: the start of the
        (⌊idle_days⌋ + 1)-th most recent active day; None when the agent has not had that many active days."""
        n = math.floor(idle_days) + 1  # idle > idle_days ⟺ at least ⌊idle_days⌋ + 1 active days since last use
        if len(self.days) < n:
            return None
        return datetime.combine(self.days[-n], time.min, tzinfo=UTC)


class ActiveDays:
    """One agent's active days, cached (see the module docstring). Thread-safe."""

    def __init__(self, agent_id: int, engine: Engine):
        self.agent_id = agent_id
        self.engine = engine
        self._days: list[date] = []
        self._last_id = 0
        self._settled: date | None = None  # a date known to be active: no read needed while it is today
        self._lock = threading.Lock()
        self.reads = 0  # database reads so far (tests and benchmarks check the cache)

    def at(self, now: datetime) -> Activity:
        """The active days up to `now`'s date."""
        today = _day(now)
        with self._lock:
            if self._settled != today:
                self._read()
                at = bisect.bisect_left(self._days, today)
                self._settled = today if at < len(self._days) and self._days[at] == today else None
            days = self._days[: bisect.bisect_right(self._days, today)]
        return Activity(tuple(days), today)

    def _read(self) -> None:
        # `in_context IN (false, true)`: both halves of the (agent_id, in_context, id) index are range-seeked
        # past the last id read, instead of walking every message of the agent.
        query = select(col(MessageRow.id), col(MessageRow.created_at)).where(
            col(MessageRow.agent_id) == self.agent_id,
            col(MessageRow.in_context).in_([False, True]),
            col(MessageRow.id) > self._last_id,
            col(MessageRow.role) == "user",
        )
        with self.engine.connect() as conn:
            rows = conn.execute(query).all()
        self.reads += 1
        if not rows:
            return
        self._last_id = max(self._last_id, max(r.id for r in rows))
        self._days = sorted(set(self._days) | {_day(r.created_at) for r in rows})
