"""Triggers in the agent YAML: `schedule` (cron or a fixed interval) and `idle` — what wakes an agent without a user.

Only the definitions live here (validated at load, so a bad cron string is an error naming file, line and field);
when they fire is `pagemind.scheduler.triggers.rules`. Each trigger has a stable `key` (its kind and a hash of what it
does and when), under which the daemon records its last firing: editing a trigger's time or message makes it a
new trigger, changing only its `missed` policy does not.
"""

from __future__ import annotations

import hashlib
import json
import re
from datetime import timedelta
from functools import cached_property
from typing import Annotated, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from croniter import croniter
from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

# The maintenance jobs a trigger may `run`: the jobs `pagemind.scheduler.jobs` registers (a test checks that the
# two agree; the runtime cannot import the scheduler to ask it).
MAINTENANCE_JOBS: tuple[str, ...] = ("compact", "reflect")

_DURATION = re.compile(r"^(?:(\d+)d)?(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?$")
MIN_EVERY = timedelta(minutes=1)


def parse_duration(text: str) -> timedelta:
    """`90s`, `15m`, `2h`, `1d` or a combination in that order (`1h30m`); raises ValueError otherwise."""
    match = _DURATION.match(text.strip().replace(" ", "")) if isinstance(text, str) else None
    if not match or not any(match.groups()):
        raise ValueError(f"not a duration: {text!r} (write e.g. 90s, 15m, 2h, 1d or 1h30m)")
    days, hours, minutes, seconds = (int(g or 0) for g in match.groups())
    value = timedelta(days=days, hours=hours, minutes=minutes, seconds=seconds)
    if value <= timedelta(0):
        raise ValueError(f"duration {text!r} must be longer than zero")
    return value


def _duration(text: str) -> str:
    parse_duration(text)
    return text


def _cron(expression: str) -> str:
    if not croniter.is_valid(expression):
        raise ValueError(
            f"not a cron expression: {expression!r} (five fields: minute hour day month weekday, e.g. '0 9 * * *')"
        )
    if len(expression.split()) > 5:
        raise ValueError(f"cron {expression!r} has a seconds field; use five fields (minute resolution)")
    return expression


def _timezone(name: str) -> str:
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {name!r} (an IANA name such as 'Europe/Berlin' or 'UTC')") from None
    return name


def _job(name: str) -> str:
    if name not in MAINTENANCE_JOBS:
        raise ValueError(f"unknown job {name!r} (jobs: {', '.join(MAINTENANCE_JOBS)})")
    return name


Duration = Annotated[str, AfterValidator(_duration)]


class _Action(BaseModel):
    """What a firing does: send the agent a `message` (a turn, as if a user wrote it) or `run` a maintenance job."""

    model_config = ConfigDict(extra="forbid")

    message: str | None = Field(None, min_length=1, description="text the agent receives as a user turn when it fires")
    run: Annotated[str, AfterValidator(_job)] | None = Field(
        None, description=f"maintenance job run instead of a turn ({', '.join(MAINTENANCE_JOBS)})"
    )
    missed: Literal["once", "skip"] = Field(
        "once", description="firings due while no daemon ran: fire the most recent one once at start, or skip them"
    )

    @model_validator(mode="after")
    def _one_action(self) -> _Action:
        if (self.message is None) == (self.run is None):
            raise ValueError("give exactly one of 'message' (a turn) or 'run' (a maintenance job)")
        return self

    @property
    def kind(self) -> str:
        """The inbox kind a firing is submitted as: `message` or `job`."""
        return "message" if self.message is not None else "job"

    @property
    def content(self) -> str:
        """The inbox content: the message's text or the job's name."""
        return self.message if self.message is not None else str(self.run)

    def _key(self, kind: str, **when: object) -> str:
        definition = json.dumps({**when, "kind": self.kind, "content": self.content}, sort_keys=True)
        return f"{kind}-{hashlib.sha256(definition.encode()).hexdigest()[:16]}"


class ScheduleTrigger(_Action):
    """Fires at the times a `cron` expression names (read in `timezone`, UTC by default), or `every` so long,
    counted from 00:00 UTC on 1 January 1970 so that every process agrees on the times (`every: 30m` fires at :00
    and :30)."""

    cron: Annotated[str, AfterValidator(_cron)] | None = Field(
        None, description="five-field cron expression (minute hour day month weekday), e.g. '0 9 * * *'"
    )
    every: Duration | None = Field(None, description="fixed interval, e.g. 30m, 2h, 1d (at least one minute)")
    timezone: Annotated[str, AfterValidator(_timezone)] | None = Field(
        None, description="IANA time zone the cron expression is read in (default UTC)"
    )

    @model_validator(mode="after")
    def _one_clock(self) -> ScheduleTrigger:
        if (self.cron is None) == (self.every is None):
            raise ValueError("give exactly one of 'cron' (e.g. '0 9 * * *') or 'every' (e.g. 30m)")
        if self.every is not None and self.timezone is not None:
            raise ValueError("timezone: applies to a cron schedule only ('every' counts in UTC)")
        if self.every is not None and self.period < MIN_EVERY:
            raise ValueError(f"every: {self.every!r} is shorter than one minute; a trigger fires at most once a minute")
        return self

    @cached_property
    def period(self) -> timedelta:
        """An `every` schedule's interval (zero for a cron schedule)."""
        return parse_duration(self.every) if self.every is not None else timedelta(0)

    @cached_property
    def zone(self) -> ZoneInfo:
        """The time zone a cron expression is read in."""
        return ZoneInfo(self.timezone or "UTC")

    @cached_property
    def key(self) -> str:
        """Stable across restarts and processes; changes when the schedule or the action does."""
        if self.cron is not None:
            return self._key("cron", cron=" ".join(self.cron.split()), timezone=self.timezone or "UTC")
        return self._key("every", every=self.period.total_seconds())


class IdleTrigger(_Action):
    """Fires once when the agent has had no message for `after`; not again until a new message ends that idle
    period."""

    after: Duration = Field(description="how long without a message before it fires, e.g. 15m, 2h")

    @cached_property
    def delay(self) -> timedelta:
        """How long the agent must be idle, as a timedelta."""
        return parse_duration(self.after)

    @cached_property
    def key(self) -> str:
        """Stable across restarts and processes; changes when the delay or the action does."""
        return self._key("idle", after=self.delay.total_seconds())


def check_unique(schedule: list[ScheduleTrigger], idle: IdleTrigger | None) -> None:
    """Two identical triggers would share one key (and fire once); the second is refused as a mistake."""
    seen: dict[str, str] = {}
    entries = [(f"schedule[{i}]", t) for i, t in enumerate(schedule)] + ([("idle", idle)] if idle else [])
    for where, trigger in entries:
        if trigger.key in seen:
            raise ValueError(f"{where}: the same trigger as {seen[trigger.key]}")
        seen[trigger.key] = where


__all__ = ["MAINTENANCE_JOBS", "IdleTrigger", "ScheduleTrigger", "check_unique", "parse_duration"]
