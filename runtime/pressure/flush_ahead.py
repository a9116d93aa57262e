"""The flush prepared ahead: the next flush's summary and extraction, started before the flush line is reached.

Once the warning line is crossed, the monitor asks for the work of a flush at the flush line to be under way in
the background (`flush_work`), so the flush usually commits without waiting for a model. This module holds that
one piece of work across steps: it starts it, keeps it while it still fits the window, discards (and reports) it
when it no longer does, hands it to the flush, and lets a trace keep and replay it.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

import structlog

from pagemind.runtime.budget import PressureReading
from pagemind.runtime.events import Event, FlushAhead, FlushAheadEvent
from pagemind.runtime.messages import Message
from pagemind.runtime.model.client import ModelClient
from pagemind.runtime.pressure.eviction import EvictionPlan
from pagemind.runtime.pressure.flush_work import FlushWork
from pagemind.runtime.privacy.policy import AgentPrivacy, redacting
from pagemind.runtime.process.crashpoints import crash_point
from pagemind.runtime.window import Window

log = structlog.get_logger("pagemind.pressure")


class AheadAgent(Protocol):
    """What the prepared flush needs of the agent; `pressure.monitor.MonitoredAgent` provides it."""

    privacy: AgentPrivacy

    @property
    def model(self) -> ModelClient: ...
    def report(self, event: Event) -> None: ...


class FlushPlanner(Protocol):
    """What the prepared flush needs of its monitor; `PressureMonitor` provides it. Read at every use, so a
    replay turning `concurrent` off later is heeded."""

    concurrent: bool

    @property
    def agent(self) -> AheadAgent: ...
    @property
    def window(self) -> Window: ...
    def tokens_of(self, message: Message) -> int: ...
    def eviction_plan(self, need: int) -> EvictionPlan: ...
    def build_work(self, plan: EvictionPlan, ahead: bool = False, now: datetime | None = None) -> FlushWork: ...


@dataclass
class PreparedFlush:
    """The next flush's work, prepared in advance (at most one at a time), held for the monitor."""

    monitor: FlushPlanner = field(repr=False, compare=False)
    work: FlushWork | None = None

    def prepare(self, step: int, reading: PressureReading) -> None:
        """Above the warning line: make sure the work for a flush at the flush line is under way, in the background
        (what leaves is known: the oldest messages worth the swing from the flush line down to the target)."""
        monitor = self.monitor
        window = monitor.window
        ahead = self.work
        if ahead is not None and ahead.fits(window.messages, window.summary):
            if not monitor.concurrent or ahead.deliverable():
                return
            self.discard(step, "its background run was stopped")
        elif ahead is not None:
            self.discard(step, "the window changed")
        plan = monitor.eviction_plan(math.ceil((reading.flush_at - reading.target) / window.correction))
        if plan.count == 0 or not plan.enough:
            return  # not enough history yet to make the swing: try again at the next step
        work = monitor.build_work(plan, ahead=True)
        agent = monitor.agent
        if monitor.concurrent:  # else (a replay) the work is done at the flush, from this snapshot, in trace order
            work.start(redacting(agent.model, agent.privacy))  # it skips `call_model`
        self.work = work
        crash_point("flush.ahead_started")  # the background work is under way; nothing of it is stored
        log.info("flush_ahead_started", agent_id=window.agent_id, evicting=work.count, tokens=plan.freed_tokens)
        agent.report(
            FlushAheadEvent(step=step, data=FlushAhead(action="started", evicting=work.count, tokens=plan.freed_tokens))
        )

    async def settle(self) -> None:
        """Wait until work prepared in the background has its answers (a caller putting the agent away
        gracefully; tests). Its result is still used only at the flush."""
        task = self.work.task if self.work is not None else None
        if task is not None:
            await asyncio.wait([task])

    def cancel(self) -> None:
        """Stop any work prepared in the background (the agent is being put away); nothing of it was stored."""
        if self.work is not None:
            self.work.cancel()
            self.work = None

    def prepared(self) -> tuple[int, datetime] | None:
        """(messages, when) of the flush work prepared ahead that still fits the window, if any: a trace's header
        keeps it, since the work outlives the turn that started it (`adopt`)."""
        ahead = self.work
        window = self.monitor.window
        if ahead is None or not ahead.fits(window.messages, window.summary):
            return None
        return ahead.count, ahead.now

    def adopt(self, count: int, now: datetime) -> None:
        """Take up flush work an earlier turn prepared for the `count` oldest messages at `now` (a replay, from the
        trace's header): held as that turn held it, not reported again (its start is in that turn's trace), and,
        as a replay's is, done at the flush."""
        monitor = self.monitor
        messages = monitor.window.messages[:count]
        plan = EvictionPlan(count, sum(monitor.tokens_of(m) for m in messages), True)
        self.work = monitor.build_work(plan, ahead=True, now=now)

    def take(self, step: int, reading: PressureReading) -> FlushWork | None:
        """The work prepared ahead, if it still fits the window and evicting it buys at least half the room a flush
        made now would (the window grew past the flush line by less than the swing it was planned for)."""
        window = self.monitor.window
        work, self.work = self.work, None
        if work is None:
            return None
        if not work.fits(window.messages, window.summary):
            self.work = work
            self.discard(step, "the window changed")
            return None
        # Used if it buys at least half the swing a flush made now would (down to the target).
        halfway = reading.target + (reading.tokens - reading.target) // 2
        if reading.tokens - math.ceil(work.freed_tokens * window.correction) > halfway:
            self.work = work
            self.discard(step, "not enough")
            return None
        return work

    def discard(self, step: int, reason: str) -> None:
        """Drop the work prepared ahead, if any, and report why."""
        work, self.work = self.work, None
        if work is None:
            return
        work.cancel()
        log.info("flush_ahead_discarded", agent_id=self.monitor.window.agent_id, reason=reason, evicting=work.count)
        self.monitor.agent.report(
            FlushAheadEvent(
                step=step,
                data=FlushAhead(action="discarded", evicting=work.count, tokens=work.freed_tokens, reason=reason),
            )
        )
