"""A readable timeline of trace events: prompt sections and a context bar, model output, tool calls and results,
memory edits, pressure events and step ends. Used by `pagemind trace show` and by `pagemind demo`."""

from __future__ import annotations

import dataclasses
import json
import re
import textwrap
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, assert_never

from pagemind.runtime.budget import usable_window
from pagemind.runtime.compiler import request_tokens, tool_schema_tokens, wire_message_tokens
from pagemind.runtime.events import (
    Event,
    FlushAheadEvent,
    FlushEvent,
    HistoryRepairEvent,
    MemoryEditEvent,
    MemoryReadEvent,
    ModelRequestEvent,
    ModelResponseEvent,
    PressureSqueezedEvent,
    PressureWarningEvent,
    ReplyDeltaEvent,
    ReplyResetEvent,
    SalienceEvent,
    StepEndEvent,
    ToolCallEvent,
    ToolResultEvent,
    TurnEvent,
)
from pagemind.runtime.spec.agent import AgentSpec
from pagemind.runtime.tokens import DEFAULT_ENCODING, count_tokens
from pagemind.runtime.trace.format import Header

_TOP_LEVEL = re.compile(r"^<(\w+)(?:\s[^>]*)?>\n.*?\n</\1>$", re.S | re.M)
_BLOCK = re.compile(r'^<block label="(\w+)".*?^</block>$', re.S | re.M)


USER_TEXT_SHOWN = 2000  # the most of a user message the timeline prints; a 200 KB paste is counted, not shown


def _clip(text: str) -> str:
    if len(text) <= USER_TEXT_SHOWN:
        return text
    rest = len(text) - USER_TEXT_SHOWN
    return f"{text[:USER_TEXT_SHOWN]}… [{rest:,} more characters not shown; {len(text):,} in all]"


def short(text: str | None, limit: int = 100) -> str:
    """One line, at most `limit` characters."""
    flat = " ".join((text or "").split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def prompt_sections(body: dict[str, Any], encoding: str) -> dict[str, int]:
    """Tokens per prompt section, read back from a request body (system parts by their tags)."""
    messages = body.get("messages") or []
    sections: dict[str, int] = {}
    system = messages[0].get("content") or "" if messages and messages[0].get("role") == "system" else ""
    for match in _TOP_LEVEL.finditer(system):
        if match.group(1) == "core_memory":
            for block in _BLOCK.finditer(match.group(0)):
                sections[f"block:{block.group(1)}"] = count_tokens(block.group(0), encoding)
        else:
            sections[match.group(1)] = count_tokens(match.group(0), encoding)
    rest = messages[1:] if system else messages
    closing = rest[-1] if rest and rest[-1].get("role") == "system" and len(rest) > 1 else None
    chat = [m for m in rest if m is not closing]
    sections["messages"] = sum(wire_message_tokens(m, encoding) for m in chat)
    if closing:
        # What changes per request (statistics, retrieved memories) closes the prompt, with the constraints'
        # restatement: each tagged part is its section, the rest is the closing line's (older traces: all of it).
        tagged = {m.group(1): count_tokens(m.group(0), encoding) for m in _TOP_LEVEL.finditer(closing["content"] or "")}
        sections.update(tagged)
        sections["closing"] = wire_message_tokens(closing, encoding) - sum(tagged.values())
    sections["tools"] = tool_schema_tokens(body.get("tools") or [], encoding)
    return sections


@dataclass(frozen=True)
class BarScale:
    """What a context bar is drawn against: the usable window and the pressure lines, read from the agent's spec
    as the pressure monitor reads them (`pagemind.runtime.budget`)."""

    usable: int
    warn: float
    flush: float
    encoding: str = DEFAULT_ENCODING

    @classmethod
    def from_spec(cls, spec: AgentSpec) -> BarScale:
        """The scale for an agent."""
        lines = spec.memory.pressure
        return cls(usable_window(spec), lines.warn, lines.flush, spec.model.encoding or DEFAULT_ENCODING)

    @classmethod
    def from_header(cls, header: Header) -> BarScale | None:
        """The scale for a recorded agent; None when its recorded spec no longer loads."""
        try:
            # A trace is shared text: the tools and schemas it names are never imported (`spec.trust`).
            return cls.from_spec(AgentSpec.model_validate(header.spec, context={"trust": "shared"}))
        except ValueError:  # a pydantic ValidationError
            return None


def context_bar(tokens: int, scale: BarScale, width: int = 30) -> str:
    """`[█████░░░░|░░░|]  4,310 / 15,200 tokens (28%)`: the warn and flush lines are marked `|`."""
    filled = min(width, round(width * tokens / scale.usable))
    cells = ["█" if i < filled else "░" for i in range(width)]
    for line in (scale.warn, scale.flush):
        mark = min(width - 1, round(width * line))
        if mark >= filled:
            cells[mark] = "|"
    percent = round(100 * tokens / scale.usable)
    return f"[{''.join(cells)}] {tokens:>6,} / {scale.usable:,} tokens ({percent}%)"


def _arguments(raw: str, limit: int) -> str:
    try:
        parsed = json.loads(raw) if raw.strip() else {}
    except json.JSONDecodeError:
        return f"<invalid JSON: {short(raw, limit)}>"
    if not isinstance(parsed, dict):
        return short(raw, limit)
    return short(", ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in parsed.items()), limit)


def _change(old: str, new: str, limit: int) -> str:
    prefix = 0
    while prefix < min(len(old), len(new)) and old[prefix] == new[prefix]:
        prefix += 1
    suffix = 0
    while suffix < min(len(old), len(new)) - prefix and old[-1 - suffix] == new[-1 - suffix]:
        suffix += 1
    removed, added = old[prefix : len(old) - suffix], new[prefix : len(new) - suffix]
    parts = [f"- {short(removed, limit // 2)!r}"] if removed else []
    parts += [f"+ {short(added, limit // 2)!r}"] if added else []
    return " ".join(parts) or "(unchanged)"


class TimelineRenderer:
    """Renders events one at a time (streaming), keeping what it needs from earlier events: it follows the turns
    and steps itself, so it also draws a live agent's events, which carry no trace stamp."""

    def __init__(self, scale: BarScale | None, width: int = 100, sections: bool = False):
        self.scale, self.width, self.sections = scale, width, sections
        self.encoding = scale.encoding if scale else DEFAULT_ENCODING
        self.turns = 0
        self.step_number = 0
        self._last_step: tuple[int, int] | None = None
        self._purpose = "step"

    @property
    def text_width(self) -> int:
        """Room for text after the indentation."""
        return max(40, self.width - 16)

    def render(self, event: Event | Header) -> list[str]:
        """The lines for one event (possibly none)."""
        match event:
            case Header():
                return self._header(event)
            case TurnEvent():
                self.turns += 1
                return self._turn(event)
            case ModelRequestEvent():
                return self._model_request(event)
            case ModelResponseEvent():
                return self._model_response(event)
            case ToolCallEvent():
                return [f"    call → {event.name}({_arguments(event.arguments, self.text_width - len(event.name))})"]
            case ToolResultEvent():
                flag = "ERROR " if event.is_error else ""
                return [f"    result ← {flag}{short(event.content, self.text_width)}"]
            case MemoryEditEvent():
                change = _change(event.old, event.new, self.text_width)
                return [f"    memory ✎ {event.label} ({event.operation}): {change}"]
            case PressureWarningEvent():
                d = event.data
                return [
                    f"    ! pressure warning: the window is {d.percent}% full ({d.tokens:,} / {d.usable:,} "
                    "tokens); the model is told to save what matters"
                ]
            case FlushEvent():
                f = event.data
                return [
                    f"    ⇣ flush: {f.evicted} message(s) evicted to recall memory, {f.tokens_before:,} → "
                    f"{f.tokens_after:,} tokens; summary {f.summary_tokens:,} tokens; extraction "
                    f"{f.extraction} ({f.extracted} stored)" + ("; prepared ahead" if f.ahead else "")
                ]
            case FlushAheadEvent():
                a = event.data
                why = f" ({a.reason})" if a.reason else ""
                return [
                    f"    ⇡ flush ahead {a.action}{why}: summary of the oldest {a.evicting} message(s), "
                    f"{a.tokens:,} tokens"
                ]
            case PressureSqueezedEvent():
                q = event.data
                return [
                    f"    ! pressure squeezed: {q.floor:,} of {q.usable:,} usable tokens cannot be evicted; a "
                    f"flush would buy {q.room:,} (several turns need {q.needed:,}), so flushes wait for "
                    f"{q.hard_at:,}"
                ]
            case SalienceEvent():
                s = event.data
                verdict = f"remember {'yes' if s.remember else 'no'}, lookup {'yes' if s.lookup else 'no'}"
                return [
                    f"    ? salience ({s.gate}, {s.source}): {verdict}, score {s.score:.2f}: "
                    + short(s.reason, self.text_width)
                ]
            case HistoryRepairEvent():
                details = ", ".join(f"{k}={v}" for k, v in dataclasses.asdict(event.data).items())
                return [f"    ! {event.kind}: {short(details, self.text_width)}"]
            case StepEndEvent():
                return [f"    end    turn over ({event.stop_reason})"] if event.stop_reason else []
            case ReplyDeltaEvent():
                return []  # the reply shows whole, as its tool call or response
            case ReplyResetEvent():
                return [f"    ↺ streamed reply discarded: {short(event.reason, self.text_width)}"]
            case MemoryReadEvent():
                return self._memory_read(event)
            case _:
                assert_never(event)

    def _memory_read(self, e: MemoryReadEvent) -> list[str]:
        # Searches only: the statistics, active days and neighbour lookups show in what they lead to.
        if e.read == "candidates":
            found = f"{len(e.result['dense'])} dense + {len(e.result['keyword'])} keyword candidates"
            return [f"    ⌕ {e.source} {found} for {short(e.request.get('text'), self.text_width // 2)!r}"]
        if e.read == "search":
            asked = short(e.request.get("query") or "(newest)", self.text_width // 2)
            return [f"    ⌕ {e.source}: {len(e.result)} message(s) for {asked!r}"]
        return []

    def _header(self, e: Header) -> list[str]:
        snap = e.snapshot
        blocks = ", ".join(f"{b.label} {len(b.value)}/{b.limit}" for b in snap.blocks) or "none"
        parent = f"\nforked from {e.parent.trace} at step {e.parent.from_step}" if e.parent else ""
        no_bar = "" if self.scale else "\n(the recorded agent spec no longer loads: no context bars)"
        return [
            f"trace {e.trace_id[:8]} · agent {e.agent} (spec {e.spec_hash}) · pagemind {e.runtime_version} · "
            f"schema {e.schema_version}{parent}",
            f"recorded {e.created_at:%Y-%m-%d %H:%M:%S} UTC · model {e.model.get('name')} · window "
            f"{e.model.get('context_window'):,} tokens",
            f"at the start: core blocks {blocks}; {len(snap.messages)} message(s) in the window, "
            f"{snap.recall_count} in recall"
            + (f", {snap.archival_count} archival" if snap.archival_count is not None else "")
            + no_bar,
        ]

    def _turn(self, e: TurnEvent) -> list[str]:
        when = f" · {e.clock[0]:%a %Y-%m-%d %H:%M}" if e.clock else ""
        lines = textwrap.wrap(_clip(e.user_message), self.width - 10) or [""]
        return ["", f"turn {self.turns}{when}", f"  user › {lines[0]}", *[f"         {line}" for line in lines[1:]]]

    def _model_request(self, e: ModelRequestEvent) -> list[str]:
        auxiliary = e.purpose != "step"
        self._purpose = e.purpose
        tokens = request_tokens(e.body.get("messages") or [], e.body.get("tools") or [], self.encoding)
        if (self.turns, e.step) != self._last_step and not auxiliary:
            self._last_step = (self.turns, e.step)
            self.step_number += 1
            bar = context_bar(tokens, self.scale) if self.scale else f"{tokens:,} prompt tokens"
            lines = [f"  step {e.step:<2} {bar}"]
            if self.sections:
                parts = prompt_sections(e.body, self.encoding)
                text = " · ".join(f"{k} {v:,}" for k, v in parts.items() if v)
                lines += ["           " + line for line in textwrap.wrap(text, self.width - 11)]
            return lines
        kind = f"{e.purpose} call" if auxiliary else "model call again (retry after a flush)"
        return [f"    {kind} ({tokens:,} prompt tokens)"]

    def _model_response(self, e: ModelResponseEvent) -> list[str]:
        message = (e.body.get("choices") or [{}])[0].get("message") or {}
        content = message.get("content")
        usage = f"{e.latency_ms:,.0f} ms" if e.latency_ms else ""
        if e.prompt_tokens:
            usage += f", {e.prompt_tokens:,}+{e.completion_tokens or 0:,} tokens"
            if e.cached_tokens is not None:
                usage += f", {e.cached_tokens:,} cached"
        lines = []
        if content and content.strip():
            label = "model " if self._purpose == "step" else f"{self._purpose} →"
            lines.append(f"    {label} {short(content, self.text_width)}")
        if usage and self.sections:
            lines.append(f"           ({usage.strip(', ')})")
        return lines


def render_trace(header: Header, events: Iterable[Event], width: int = 100) -> list[str]:
    """The whole timeline of a trace, with prompt sections per step."""
    renderer = TimelineRenderer(BarScale.from_header(header), width, sections=True)
    lines = renderer.render(header)
    events = list(events)
    for index, event in enumerate(events):
        if isinstance(event, TurnEvent) and not event.clock:
            later = next((e.clock[0] for e in events[index + 1 :] if e.clock), None)
            event = dataclasses.replace(event, clock=(later,)) if later else event
        lines += renderer.render(event)
    return lines
