"""The pressure monitor: measure the window against its budget, warn once per cycle, flush when full.

Before every model call: repair the history, check that the pinned part fits (`pressure.pinned`), then read the
pressure. Above the warning line the model gets one system alert per cycle to save what matters; above the flush
line the oldest messages are evicted (whole tool groups only) down to the target, folded into the recursive
summary, and mined for archival memories. Evicted messages stay in recall memory. A flush starts a new cycle.

The model's part of a flush (summary, extraction) is prepared ahead: once the warning line is crossed, the work
for the messages a flush at the flush line would evict starts in the background (`flush_work`), held across steps
by `flush_ahead`, so the flush usually commits without waiting for a model. Work that no longer fits the window is
discarded and done again.
"""

from __future__ import annotations

import asyncio
import dataclasses
import math
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

import structlog

from pagemind.runtime.budget import (
    Pressure,
    PressureReading,
    Squeeze,
    max_message_tokens,
    read_pressure,
    squeeze,
    summary_budget,
    usable_window,
)
from pagemind.runtime.compiler import CompiledContext, message_tokens
from pagemind.runtime.events import (
    Event,
    Flush,
    FlushEvent,
    HistoryRepair,
    HistoryRepairEvent,
    ModelRequestEvent,
    ModelResponseEvent,
    PressureSqueezedEvent,
    PressureWarning,
    PressureWarningEvent,
    Salience,
    SalienceEvent,
    Squeezed,
)
from pagemind.runtime.messages import Message
from pagemind.runtime.model.client import ModelClient, ModelRequest, ModelResponse
from pagemind.runtime.pressure.eviction import EvictionPlan, newest_group_start, plan_eviction
from pagemind.runtime.pressure.extraction import ExtractionReport, store_extraction
from pagemind.runtime.pressure.flush_ahead import PreparedFlush
from pagemind.runtime.pressure.flush_work import FlushOutcome, FlushWork, WorkSettings
from pagemind.runtime.pressure.history_repair import ValidityMemo, repair_history
from pagemind.runtime.pressure.pinned import check_pinned_fits, pinned_tokens
from pagemind.runtime.privacy.policy import AgentPrivacy
from pagemind.runtime.process.crashpoints import crash_point
from pagemind.runtime.spec.agent import AgentSpec
from pagemind.runtime.window import Window
from pagemind.tools import ArchivalMemory

log = structlog.get_logger("pagemind.pressure")

WARNING_TEXT = (
    "[system alert — not from the user] Memory pressure: the context window is {percent}% full. The oldest "
    "messages will soon leave the window (they stay searchable with conversation_search, and a summary is kept). "
    "Save what matters now: lasting facts about the user with core_memory_append / core_memory_replace, details "
    "worth keeping with archival_memory_insert. Do not mention this alert to the user."
)


def updated_correction(old: float, estimated: int, provider_prompt_tokens: int | None) -> float:
    """Move the correction factor toward what the provider counted (EMA, clamped to [0.5, 2])."""
    if not provider_prompt_tokens or estimated <= 0:
        return old
    observed = provider_prompt_tokens / estimated
    return min(2.0, max(0.5, 0.8 * old + 0.2 * observed))


class MonitoredAgent(Protocol):
    """What the monitor needs of the agent it watches; `runtime.agent.Agent` provides it. Read at every use, so
    a clock or an archival memory swapped in later (a trace recorder's tape clock, say) is the one used."""

    spec: AgentSpec
    window: Window
    archival: ArchivalMemory | None
    privacy: AgentPrivacy

    @property
    def model(self) -> ModelClient: ...
    def now(self) -> datetime: ...
    def compile(self) -> CompiledContext: ...
    async def call_model(self, request: ModelRequest, step: int) -> ModelResponse: ...
    def report(self, event: Event) -> None: ...
    def extraction_gate(self, messages: Sequence[Message]) -> Salience | None: ...


@dataclass
class PressureMonitor:
    """Policy over an agent's `Window`: before every model call, repair the history, read the pressure, warn
    once per cycle above the warning line and flush above the flush line. It decides; the window stores.

    `concurrent` lets a flush's model calls run off the user's path (ahead in the background, or both at once);
    a replay turns it off so the calls are made in the order its trace holds their answers."""

    agent: MonitoredAgent
    concurrent: bool = True
    told_squeezed: bool = field(default=False, init=False)  # said once per loaded agent (a trace snapshot keeps it)
    ahead: PreparedFlush = field(init=False, repr=False, compare=False)  # the next flush's work, prepared early
    _valid: ValidityMemo = field(default_factory=ValidityMemo, init=False)  # the last window found valid
    _copied: int = field(default=0, init=False)  # `Window.copied` as `_valid` last followed it

    def __post_init__(self) -> None:
        self.ahead = PreparedFlush(self)

    @property
    def spec(self) -> AgentSpec:
        """The watched agent's spec."""
        return self.agent.spec

    @property
    def window(self) -> Window:
        """The watched agent's window."""
        return self.agent.window

    @property
    def encoding(self) -> str:
        """The tiktoken encoding the window is counted in."""
        return self.spec.model.encoding or "o200k_base"

    async def relieve(self, step: int, *, force: bool = False) -> CompiledContext:
        """Run before every model call: repair, check the pinned part, then warn or flush as the reading says.

        Returns the context to send (compiled once more only when the window changed). `force` flushes whatever
        the reading (the provider said the prompt is too long).
        """
        await self.repair(step)
        compiled = self.agent.compile()
        check_pinned_fits(compiled, self.spec)
        reading = read_pressure(compiled.total_tokens, self.window.correction, self.spec)
        if force:
            return await self.flush(step, reading, forced=True) or compiled
        if reading.level is Pressure.OK:
            return compiled
        room = self.room(reading, compiled)
        if room.squeezed:
            self._say_squeezed(step, reading, room, compiled)
        if reading.tokens >= (room.hard_at if room.squeezed else reading.flush_at):
            return await self.flush(step, reading) or compiled
        if room.squeezed:
            # A squeezed window sits above the warning line right after every flush: an alert per cycle would
            # only eat the little room there is (and its flushes, at the hard line, are not prepared ahead).
            return compiled
        if reading.level is Pressure.WARN and not self.window.warned:
            await self.warn(step, reading)
            compiled = self.agent.compile()  # the alert is now one of the messages
        self.prepare(step, reading)
        return compiled

    def room(self, reading: PressureReading, compiled: CompiledContext) -> Squeeze:
        """How much room a flush could buy now: everything but the evictable messages is the floor. `compiled` is
        the window's context as compiled now: its messages' tokens are the sum, less the newest group's (which never
        leaves), so nothing is summed again over the whole window."""
        messages = self.window.messages
        newest = sum(self.tokens_of(m) for m in messages[newest_group_start(messages) :])
        evictable = compiled.sections.get("messages", 0) - newest if messages else 0
        return squeeze(reading, reading.tokens - math.ceil(evictable * self.window.correction), self.spec)

    def tokens_of(self, message: Message) -> int:
        """A message's tokens as the compiler counts it (clipped to the per-message cap)."""
        return message_tokens(message, self.encoding, max_message_tokens(self.spec))

    def _say_squeezed(self, step: int, reading: PressureReading, room: Squeeze, compiled: CompiledContext) -> None:
        if self.told_squeezed:
            return
        self.told_squeezed = True
        told = Squeezed(
            tokens=reading.tokens,
            usable=reading.usable,
            flush_at=reading.flush_at,
            hard_at=room.hard_at,
            floor=room.floor,
            room=room.room,
            needed=room.needed,
            pinned=pinned_tokens(compiled),
        )
        log.warning(
            "pressure_squeezed",
            agent_id=self.window.agent_id,
            advice="raise model.context_window, drop tools or shrink core blocks",
            **dataclasses.asdict(told),
        )
        self.agent.report(PressureSqueezedEvent(step=step, data=told))

    async def repair(self, step: int) -> None:
        """Repair the in-context history if needed, storing the repair."""
        if self._copied != self.window.copied:
            self._copied = self.window.copied
            self._valid.rebind(self.window.copies)
        if self._valid.is_valid(self.window.messages):  # the common case, checked incrementally
            return
        repair = repair_history(self.window.messages, self.agent.now())
        if not repair.changed:
            return
        stored = await self.window.repair(repair.messages, repair.added, repair.dropped)
        log.warning("history_repaired", agent_id=self.window.agent_id, problems=repair.problems)
        self.agent.report(
            HistoryRepairEvent(
                step=step, data=HistoryRepair(problems=repair.problems, added=len(stored), dropped=len(repair.dropped))
            )
        )

    async def warn(self, step: int, reading: PressureReading) -> None:
        """Give the model its one warning of this cycle."""
        percent = round(100 * reading.tokens / reading.usable)
        await self.window.accept(Message("system", WARNING_TEXT.format(percent=percent), self.agent.now()))
        await self.window.mark_warned()
        log.info(
            "pressure_warning",
            agent_id=self.window.agent_id,
            tokens=reading.tokens,
            usable=reading.usable,
            percent=percent,
        )
        self.agent.report(
            PressureWarningEvent(
                step=step, data=PressureWarning(tokens=reading.tokens, usable=reading.usable, percent=percent)
            )
        )

    def prepare(self, step: int, reading: PressureReading) -> None:
        """Above the warning line: make sure the next flush's work is under way (`PreparedFlush.prepare`)."""
        self.ahead.prepare(step, reading)

    async def settle(self) -> None:
        """Wait until work prepared in the background has its answers (`PreparedFlush.settle`)."""
        await self.ahead.settle()

    def cancel(self) -> None:
        """Stop any work prepared in the background (the agent is being put away); nothing of it was stored."""
        self.ahead.cancel()

    async def flush(self, step: int, reading: PressureReading, forced: bool = False) -> CompiledContext | None:
        """Evict the oldest messages down to the target; returns the context compiled after the eviction, or
        None when nothing could be evicted.

        Work prepared ahead is used when it still fits the window and buys at least half the room; otherwise the
        work is done now, its two model calls at once. A forced flush (the provider said the prompt is too long
        although our count says it fits: its window is smaller than configured) frees at least half of the
        messages' tokens.
        """
        work = self.ahead.take(step, reading) if not forced else None
        if work is None:
            self.ahead.discard(step, "forced flush")
            need = math.ceil((reading.tokens - reading.target) / self.window.correction)
            if forced:
                need = max(need, sum(self.tokens_of(m) for m in self.window.messages) // 2)
            plan = self.eviction_plan(need)
            if plan.count == 0:
                log.warning("flush_nothing_evictable", agent_id=self.window.agent_id, tokens=reading.tokens, need=need)
                return None
            work = self.build_work(plan)
        waiting = time.perf_counter()
        outcome = await self._finish(step, work)
        waited_ms = (time.perf_counter() - waiting) * 1000
        # Store the extracted memories before the eviction commits: a crash in between then re-extracts (dedupe
        # absorbs the repeat) instead of losing the facts of messages that have already left the window.
        report = await self._store(outcome, work)
        crash_point("flush.before_evict")
        estimated_after = reading.tokens - math.ceil(work.freed_tokens * self.window.correction)
        await self.window.evict(work.count, outcome.summary.text, reading.tokens, estimated_after, self.agent.now())
        after = self.agent.compile()
        summary = outcome.summary
        done = Flush(
            evicted=work.count,
            tokens_before=reading.tokens,
            tokens_after=after.total_tokens,
            summary_tokens=after.sections.get("summary", 0),
            summary_chunks=summary.chunks,
            summary_truncated=summary.truncated,
            extraction=report.status,
            extracted=report.stored,
            enough=work.enough,
            ahead=work.ahead,
            waited_ms=round(waited_ms, 3),
        )
        log.info("flush", agent_id=self.window.agent_id, **dataclasses.asdict(done))
        self.agent.report(FlushEvent(step=step, data=done))
        return after

    async def track_usage(self, compiled: CompiledContext, response: ModelResponse) -> None:
        """Keep the per-agent correction factor in step with the provider's own prompt-token counts."""
        correction = updated_correction(self.window.correction, compiled.total_tokens, response.prompt_tokens)
        if abs(correction - self.window.correction) > 0.01:
            await self.window.set_correction(correction)

    def prepared(self) -> tuple[int, datetime] | None:
        """(messages, when) of the flush work prepared ahead that still fits the window, if any, for a trace's
        header (`PreparedFlush.prepared`)."""
        return self.ahead.prepared()

    def adopt_prepared(self, count: int, now: datetime) -> None:
        """Take up flush work an earlier turn prepared, from a trace's header (a replay; `PreparedFlush.adopt`)."""
        self.ahead.adopt(count, now)

    def eviction_plan(self, need: int) -> EvictionPlan:
        """The oldest messages (whole tool groups) worth `need` tokens, counted as compiled."""
        messages = self.window.messages
        return plan_eviction(messages, [self.tokens_of(m) for m in messages], need)  # tokens as compiled: clipped

    def build_work(self, plan: EvictionPlan, ahead: bool = False, now: datetime | None = None) -> FlushWork:
        """The flush work (summary, extraction) for the messages `plan` evicts, from the window as it is now."""
        spec = self.spec
        settings = WorkSettings(
            model=spec.memory.summarizer_model or spec.model.name,
            summary_budget=summary_budget(spec),
            window=usable_window(spec),
            encoding=self.encoding,
            extract=spec.memory.extraction and self.agent.archival is not None,
            muted=getattr(getattr(self.agent.archival, "mutes", None), "muted", None),  # (`memory.topics`)
        )
        evicted = tuple(self.window.messages[: plan.count])
        return FlushWork(
            evicted,
            self.window.summary,
            plan.freed_tokens,
            plan.enough,
            now or self.agent.now(),
            settings,
            ahead=ahead,
            salience=self.agent.extraction_gate(evicted) if settings.extract else None,
        )

    async def _finish(self, step: int, work: FlushWork) -> FlushOutcome:
        """The work's outcome, its model calls reported as they were made (summary first, then extraction),
        after the salience gate's decision on the extraction."""
        if work.salience is not None:
            self.agent.report(SalienceEvent(step=step, data=work.salience))
        if not self.concurrent:
            return await work.run_in_order(lambda request: self.agent.call_model(request, step))
        outcome: FlushOutcome | None = None
        task = work.task if work.deliverable() else None
        if task is not None and task.done():
            outcome = task.result()
        elif task is not None:
            try:
                outcome = await asyncio.shield(task)  # a turn cut short does not cancel the work
            except Exception:  # a bug in the background: logged by the task; do the work here instead
                work.calls, outcome = [], None
        if outcome is None:
            outcome = await work.run_concurrently(self.agent.model)
        for call in work.calls:
            self.agent.report(ModelRequestEvent.from_request(step, call.request))
            if call.response is not None:
                self.agent.report(ModelResponseEvent.from_response(step, call.response))
        return outcome

    async def _store(self, outcome: FlushOutcome, work: FlushWork) -> ExtractionReport:
        archival = self.agent.archival
        if archival is None:
            return ExtractionReport("skipped")
        review = getattr(self.agent, "review_queue", None)  # `memory.review`: held for a person when required
        return await store_extraction(archival, outcome.extraction, work.evicted, review=review)
