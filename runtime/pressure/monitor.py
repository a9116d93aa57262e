"""The pressure monitor: measure the window against its budget, warn once per cycle, flush when full.

Before every model call: repair the history, then read the pressure. Above the warning line the model gets one
system alert per cycle to save what matters; above the flush line the oldest messages are evicted (whole tool
groups only) down to the target, folded into the recursive summary, and mined for archival memories. Evicted
messages stay in recall memory. A flush starts a new cycle.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

import structlog

from pagemind.runtime.compiler import CompiledContext, message_tokens
from pagemind.runtime.events import (
    Flush, FlushEvent, HistoryRepair, HistoryRepairEvent, PressureSqueezedEvent, PressureWarning, PressureWarningEvent,
    RuntimeEvent, Squeezed,
)
from pagemind.runtime.pressure.eviction import atomic_groups, plan_eviction
from pagemind.runtime.pressure.extraction import ExtractionReport, extract_and_store
from pagemind.runtime.pressure.history_repair import repair_history
from pagemind.runtime.messages import Message
from pagemind.runtime.model_client import ModelError, ModelRequest, ModelResponse
from pagemind.runtime.budget import (
    Pressure, PressureReading, Squeeze, max_message_tokens, read_pressure, squeeze, summary_budget, usable_window,
)
from pagemind.runtime.spec import AgentSpec
from pagemind.runtime.pressure.summarizer import SummaryResult, summarize
from pagemind.runtime.window import Window
from pagemind.tools import ArchivalMemory

log = structlog.get_logger("pagemind.pressure")

PINNED_SECTIONS = ("system", "tools", "closing", "reply_priming")
WARNING_TEXT = (
    "[system alert — not from the user] Memory pressure: the context window is {percent}% full. The oldest "
    "messages will soon leave the window (they stay searchable with conversation_search, and a summary is kept). "
    "Save what matters now: lasting facts about the user with core_memory_append / core_memory_replace, details "
    "worth keeping with archival_memory_insert. Do not mention this alert to the user."
)


class ContextOverflow(ModelError):
    """The pinned part of the prompt alone does not fit the window; the message names each part and its size."""


def pinned_tokens(compiled: CompiledContext) -> dict[str, int]:
    """The parts of the prompt no eviction can shrink: instructions, core blocks, tool schemas, closing line."""
    return {name: tokens for name, tokens in compiled.sections.items()
            if name in PINNED_SECTIONS or name.startswith("block:")}


def check_pinned_fits(compiled: CompiledContext, spec: AgentSpec) -> None:
    """Raise ContextOverflow, naming every pinned part and its size, if they alone exceed the flush line."""
    pinned = pinned_tokens(compiled)
    limit = int(usable_window(spec) * spec.memory.pressure.flush)
    if sum(pinned.values()) <= limit:
        return
    parts = ", ".join(f"{name} {tokens}" for name, tokens in sorted(pinned.items(), key=lambda kv: -kv[1]))
    raise ContextOverflow(
        f"the pinned part of the prompt needs {sum(pinned.values())} tokens but only {limit} fit below the flush "
        f"line (context_window {spec.model.context_window}, output reserve "
        f"{spec.model.context_window - usable_window(spec)}). Parts: {parts}. Shrink a core block, drop tools, "
        "or raise model.context_window; the agent's state is unchanged."
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

    def now(self) -> datetime: ...
    def compile(self) -> CompiledContext: ...
    async def call_model(self, request: ModelRequest, step: int) -> ModelResponse: ...
    def report(self, event: RuntimeEvent) -> None: ...


@dataclass
class PressureMonitor:
    """Policy over an agent's `Window`: before every model call, repair the history, read the pressure, warn
    once per cycle above the warning line and flush above the flush line. It decides; the window stores."""

    agent: MonitoredAgent
    _told_squeezed: bool = field(default=False, init=False)  # said once per loaded agent

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
        self.repair(step)
        compiled = self.agent.compile()
        check_pinned_fits(compiled, self.spec)
        reading = read_pressure(compiled.total_tokens, self.window.correction, self.spec)
        if force:
            return await self.flush(step, reading, forced=True) or compiled
        if reading.level is Pressure.OK:
            return compiled
        room = self.room(reading)
        if room.squeezed:
            self._say_squeezed(step, reading, room, compiled)
        if reading.tokens >= (room.hard_at if room.squeezed else reading.flush_at):
            return await self.flush(step, reading) or compiled
        # A squeezed window sits above the warning line right after every flush: an alert per cycle would only
        # eat the little room there is.
        if reading.level is Pressure.WARN and not self.window.warned and not room.squeezed:
            self.warn(step, reading)
            return self.agent.compile()  # the alert is now one of the messages
        return compiled

    def room(self, reading: PressureReading) -> Squeeze:
        """How much room a flush could buy now: everything but the evictable messages is the floor."""
        groups = atomic_groups(self.window.messages)[:-1]  # the newest group never leaves
        evictable = sum(self._tokens(m) for start, end in groups for m in self.window.messages[start:end])
        return squeeze(reading, reading.tokens - math.ceil(evictable * self.window.correction), self.spec)

    def _tokens(self, message: Message) -> int:
        return message_tokens(message, self.encoding, max_message_tokens(self.spec))

    def _say_squeezed(self, step: int, reading: PressureReading, room: Squeeze, compiled: CompiledContext) -> None:
        if self._told_squeezed:
            return
        self._told_squeezed = True
        told = Squeezed(tokens=reading.tokens, usable=reading.usable, flush_at=reading.flush_at, hard_at=room.hard_at,
                        floor=room.floor, room=room.room, needed=room.needed, pinned=pinned_tokens(compiled))
        log.warning("pressure_squeezed", agent_id=self.window.agent_id,
                    advice="raise model.context_window, drop tools or shrink core blocks", **dataclasses.asdict(told))
        self.agent.report(PressureSqueezedEvent(step=step, data=told))

    def repair(self, step: int) -> None:
        """Repair the in-context history if needed, storing the repair."""
        repair = repair_history(self.window.messages, self.agent.now())
        if not repair.changed:
            return
        stored = self.window.repair(repair.messages, repair.added, repair.dropped)
        log.warning("history_repaired", agent_id=self.window.agent_id, problems=repair.problems)
        self.agent.report(HistoryRepairEvent(step=step, data=HistoryRepair(
            problems=repair.problems, added=len(stored), dropped=len(repair.dropped))))

    def warn(self, step: int, reading: PressureReading) -> None:
        """Give the model its one warning of this cycle."""
        percent = round(100 * reading.tokens / reading.usable)
        self.window.accept(Message("system", WARNING_TEXT.format(percent=percent), self.agent.now()))
        self.window.mark_warned()
        log.info("pressure_warning", agent_id=self.window.agent_id, tokens=reading.tokens, usable=reading.usable,
                 percent=percent)
        self.agent.report(PressureWarningEvent(step=step, data=PressureWarning(
            tokens=reading.tokens, usable=reading.usable, percent=percent)))

    async def flush(self, step: int, reading: PressureReading, forced: bool = False) -> CompiledContext | None:
        """Evict the oldest messages down to the target; returns the context compiled after the eviction, or
        None when nothing could be evicted.

        A forced flush (the provider said the prompt is too long although our count says it fits: its window is
        smaller than configured) frees at least half of the messages' tokens.
        """
        messages = self.window.messages
        tokens = [self._tokens(m) for m in messages]  # as the compiler counts them: clipped
        need = math.ceil((reading.tokens - reading.target) / self.window.correction)
        if forced:
            need = max(need, sum(tokens) // 2)
        plan = plan_eviction(messages, tokens, need)
        if plan.count == 0:
            log.warning("flush_nothing_evictable", agent_id=self.window.agent_id, tokens=reading.tokens, need=need)
            return None
        evicted = messages[: plan.count]
        summary = await self._new_summary(step, evicted)
        # Extract before the eviction commits: a crash in between then re-extracts (dedupe absorbs the repeat)
        # instead of losing the facts of messages that have already left the window.
        report = await self._extract(step, evicted)
        estimated_after = reading.tokens - math.ceil(plan.freed_tokens * self.window.correction)
        self.window.evict(plan.count, summary.text, reading.tokens, estimated_after, self.agent.now())
        after = self.agent.compile()
        done = Flush(evicted=plan.count, tokens_before=reading.tokens, tokens_after=after.total_tokens,
                     summary_tokens=after.sections.get("summary", 0), summary_chunks=summary.chunks,
                     summary_truncated=summary.truncated,
                     extraction=report.status, extracted=report.stored, enough=plan.enough)
        log.info("flush", agent_id=self.window.agent_id, **dataclasses.asdict(done))
        self.agent.report(FlushEvent(step=step, data=done))
        return after

    def track_usage(self, compiled: CompiledContext, response: ModelResponse) -> None:
        """Keep the per-agent correction factor in step with the provider's own prompt-token counts."""
        correction = updated_correction(self.window.correction, compiled.total_tokens, response.prompt_tokens)
        if abs(correction - self.window.correction) > 0.01:
            self.window.set_correction(correction)

    async def _new_summary(self, step: int, evicted: list[Message]) -> SummaryResult:
        spec, old = self.spec, self.window.summary
        try:
            return await summarize(
                lambda request: self.agent.call_model(request, step),
                model=spec.memory.summarizer_model or spec.model.name,
                old_summary=old, evicted=evicted, budget=summary_budget(spec), window=usable_window(spec),
                encoding=self.encoding)
        except (ModelError, ValueError) as exc:
            # The window must still shrink; keep the old summary and point at recall memory for the gap.
            log.error("summary_failed", agent_id=self.window.agent_id, error=str(exc)[:300])
            first, last = evicted[0].created_at, evicted[-1].created_at
            note = (f"[{len(evicted)} messages from {first:%Y-%m-%d %H:%M} to {last:%Y-%m-%d %H:%M} left the window "
                    "without a summary; search them with conversation_search.]")
            return SummaryResult(f"{old}\n{note}".strip(), chunks=0, truncated=False)

    async def _extract(self, step: int, evicted: list[Message]) -> ExtractionReport:
        if not self.spec.memory.extraction or self.agent.archival is None:
            return ExtractionReport("skipped")
        try:
            return await extract_and_store(
                lambda request: self.agent.call_model(request, step), self.agent.archival,
                model=self.spec.memory.summarizer_model or self.spec.model.name, messages=evicted, now=self.agent.now())
        except ModelError as exc:
            log.error("extraction_failed", agent_id=self.window.agent_id, error=str(exc)[:300])
            return ExtractionReport("failed", error=str(exc)[:300])
