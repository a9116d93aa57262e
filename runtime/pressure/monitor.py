"""The pressure monitor: measure the window against its budget, warn once per cycle, flush when full.

Before every model call: repair the history, then read the pressure. Above the warning line the model gets one
system alert per cycle to save what matters; above the flush line the oldest messages are evicted (whole tool
groups only) down to the target, folded into the recursive summary, and mined for archival memories. Evicted
messages stay in recall memory. A flush starts a new cycle.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import structlog

from pagemind.runtime.compiler import CompiledContext, message_tokens
from pagemind.runtime.pressure.eviction import plan_eviction
from pagemind.runtime.pressure.extraction import ExtractionReport, extract_and_store
from pagemind.runtime.pressure.history_repair import repair_history
from pagemind.runtime.messages import Message
from pagemind.runtime.model_client import ModelError, ModelResponse
from pagemind.runtime.budget import Pressure, PressureReading, read_pressure, summary_budget, usable_window
from pagemind.runtime.spec import AgentSpec
from pagemind.runtime.pressure.summarizer import SummaryResult, summarize

if TYPE_CHECKING:
    from pagemind.runtime.agent import Agent

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


def repair_window(agent: "Agent", step: int) -> None:
    """Repair the in-context history if needed, storing the repair."""
    repair = repair_history(agent.context_messages, agent.clock())
    if not repair.changed:
        return
    stored = agent.store.apply_repair(agent.record.id, repair.added, [m.id for m in repair.dropped if m.id])
    by_call = {m.tool_call_id: m for m in stored}
    agent.context_messages = [by_call.get(m.tool_call_id, m) if m in repair.added else m for m in repair.messages]
    agent.recall_count += len(stored)
    log.warning("history_repaired", agent=agent.name, problems=repair.problems)
    agent.observer.event(step, "history_repair", {"problems": repair.problems, "added": len(stored),
                                                  "dropped": len(repair.dropped)})


def warn(agent: "Agent", step: int, reading: PressureReading) -> None:
    """Give the model its one warning of this cycle."""
    percent = round(100 * reading.tokens / reading.usable)
    alert = Message("system", WARNING_TEXT.format(percent=percent), agent.clock())
    agent.accept(alert)
    agent.store.set_pressure_state(agent.record.id, warned=True)
    agent.record = dataclasses.replace(agent.record, pressure_warned=True)
    log.info("pressure_warning", agent=agent.name, tokens=reading.tokens, usable=reading.usable, percent=percent)
    agent.observer.event(step, "pressure_warning", {"tokens": reading.tokens, "usable": reading.usable,
                                                    "percent": percent})


async def _new_summary(agent: "Agent", step: int, evicted: list[Message]) -> SummaryResult:
    spec = agent.spec

    async def call(request):  # noqa: ANN001 — a ModelRequest
        return await agent.call_model(request, step)

    try:
        result = await summarize(
            call, model=spec.memory.summarizer_model or spec.model.name, old_summary=agent.record.summary,
            evicted=evicted, budget=summary_budget(spec), window=usable_window(spec),
            encoding=spec.model.encoding or "o200k_base")
        return result
    except (ModelError, ValueError) as exc:
        # The window must still shrink; keep the old summary and point at recall memory for the gap.
        log.error("summary_failed", agent=agent.name, error=str(exc)[:300])
        first, last = evicted[0].created_at, evicted[-1].created_at
        note = (f"[{len(evicted)} messages from {first:%Y-%m-%d %H:%M} to {last:%Y-%m-%d %H:%M} left the window "
                "without a summary; search them with conversation_search.]")
        return SummaryResult(f"{agent.record.summary}\n{note}".strip(), chunks=0, truncated=False)


async def _extract(agent: "Agent", step: int, evicted: list[Message]) -> ExtractionReport:
    if not agent.spec.memory.extraction or agent.archival is None:
        return ExtractionReport("skipped")

    async def call(request):  # noqa: ANN001
        return await agent.call_model(request, step)

    try:
        return await extract_and_store(call, agent.archival, model=agent.spec.memory.summarizer_model or
                                       agent.spec.model.name, messages=evicted, now=agent.clock())
    except ModelError as exc:
        log.error("extraction_failed", agent=agent.name, error=str(exc)[:300])
        return ExtractionReport("failed", error=str(exc)[:300])


async def flush(agent: "Agent", step: int, reading: PressureReading, forced: bool = False) -> CompiledContext | None:
    """Evict the oldest messages down to the target; returns the context compiled after the eviction, or None
    when nothing could be evicted.

    A forced flush (the provider said the prompt is too long although our count says it fits: its window is
    smaller than configured) frees at least half of the messages' tokens.
    """
    encoding = agent.spec.model.encoding or "o200k_base"
    tokens = [message_tokens(m, encoding) for m in agent.context_messages]
    need = math.ceil((reading.tokens - reading.target) / agent.record.token_correction)
    if forced:
        need = max(need, sum(tokens) // 2)
    plan = plan_eviction(agent.context_messages, tokens, need)
    if plan.count == 0:
        log.warning("flush_nothing_evictable", agent=agent.name, tokens=reading.tokens, need=need)
        return None
    evicted = agent.context_messages[: plan.count]
    summary = await _new_summary(agent, step, evicted)
    # Extract before the eviction commits: a crash in between then re-extracts (dedupe absorbs the repeat)
    # instead of losing the facts of messages that have already left the window.
    report = await _extract(agent, step, evicted)
    agent.store.evict(agent.record.id, [m.id for m in evicted if m.id is not None], summary.text,
                      reading.tokens, reading.tokens - plan.freed_tokens, agent.clock())
    agent.context_messages = agent.context_messages[plan.count:]
    agent.record = dataclasses.replace(agent.record, summary=summary.text, pressure_warned=False)
    after = agent.compile()
    event = {"evicted": plan.count, "tokens_before": reading.tokens, "tokens_after": after.total_tokens,
             "summary_tokens": after.sections.get("summary", 0), "summary_chunks": summary.chunks,
             "summary_truncated": summary.truncated,
             "extraction": report.status, "extracted": report.stored, "enough": plan.enough}
    log.info("flush", agent=agent.name, **event)
    agent.observer.event(step, "flush", event)
    return after


async def relieve_pressure(agent: "Agent", step: int, *, force: bool = False) -> CompiledContext:
    """Run before every model call: repair, check the pinned part, then warn or flush as the reading says.

    Returns the context to send (compiled once more only when the window changed).
    """
    repair_window(agent, step)
    compiled = agent.compile()
    check_pinned_fits(compiled, agent.spec)
    reading = read_pressure(compiled.total_tokens, agent.record.token_correction, agent.spec)
    if force or reading.level is Pressure.FLUSH:
        return await flush(agent, step, reading, forced=force) or compiled
    if reading.level is Pressure.WARN and not agent.record.pressure_warned:
        warn(agent, step, reading)
        return agent.compile()  # the alert is now one of the messages
    return compiled


def track_usage(agent: "Agent", compiled: CompiledContext, response: ModelResponse) -> None:
    """Keep the per-agent correction factor in step with the provider's own prompt-token counts."""
    correction = updated_correction(agent.record.token_correction, compiled.total_tokens, response.prompt_tokens)
    if abs(correction - agent.record.token_correction) > 0.01:
        agent.store.set_pressure_state(agent.record.id, correction=correction)
        agent.record = dataclasses.replace(agent.record, token_correction=correction)
