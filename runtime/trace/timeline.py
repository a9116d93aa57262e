"""A readable timeline of trace events: prompt sections and a context bar, model output, tool calls and results,
memory edits, pressure events and step ends. Used by `pagemind trace show` and by `pagemind demo`."""

from __future__ import annotations

import json
import re
import textwrap
from dataclasses import dataclass
from typing import Any, Iterable

from pagemind.runtime.tokens import DEFAULT_ENCODING, TOKENS_PER_MESSAGE, TOKENS_REPLY_PRIMING, count_tokens
from pagemind.runtime.trace.recorder import (
    Header, MemoryEditEvent, ModelRequestEvent, ModelResponseEvent, RuntimeEvent, StepEndEvent, ToolCallEvent,
    ToolResultEvent, TurnEvent,
)

_TOP_LEVEL = re.compile(r"^<(\w+)(?:\s[^>]*)?>\n.*?\n</\1>$", re.S | re.M)
_BLOCK = re.compile(r'^<block label="(\w+)".*?^</block>$', re.S | re.M)


def short(text: str | None, limit: int = 100) -> str:
    """One line, at most `limit` characters."""
    flat = " ".join((text or "").split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


def message_tokens(message: dict[str, Any], encoding: str) -> int:
    """A wire message's tokens, counted as the compiler counts them."""
    tokens = TOKENS_PER_MESSAGE + count_tokens(message.get("content") or "", encoding)
    for call in message.get("tool_calls") or ():
        function = call.get("function") or {}
        tokens += count_tokens(function.get("name") or "", encoding) + 3
        tokens += count_tokens(function.get("arguments") or "", encoding)
    if message.get("tool_call_id"):
        tokens += count_tokens(message["tool_call_id"], encoding)
    return tokens


def request_tokens(body: dict[str, Any], encoding: str) -> int:
    """The prompt tokens of a request body: messages, tool schemas and reply priming."""
    tools = body.get("tools") or []
    tool_tokens = count_tokens(json.dumps(tools, sort_keys=True), encoding) if tools else 0
    return sum(message_tokens(m, encoding) for m in body.get("messages") or []) + tool_tokens + TOKENS_REPLY_PRIMING


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
    sections["messages"] = sum(message_tokens(m, encoding) for m in chat)
    if closing:
        sections["closing"] = message_tokens(closing, encoding)
    tools = body.get("tools") or []
    sections["tools"] = count_tokens(json.dumps(tools, sort_keys=True), encoding) if tools else 0
    return sections


@dataclass(frozen=True)
class Window:
    """The window a context bar is drawn against."""

    usable: int
    warn: float = 0.70
    flush: float = 0.90
    encoding: str = DEFAULT_ENCODING

    @classmethod
    def from_spec(cls, spec: dict[str, Any]) -> "Window":
        """From a (dumped) agent spec: `context_window − output reserve`, and the pressure lines."""
        model, memory = spec.get("model") or {}, spec.get("memory") or {}
        reserve = (memory.get("budgets") or {}).get("output_reserve") or model.get("max_output_tokens") or 0
        pressure = memory.get("pressure") or {}
        return cls(max(1, (model.get("context_window") or 8192) - reserve), pressure.get("warn", 0.70),
                   pressure.get("flush", 0.90), model.get("encoding") or DEFAULT_ENCODING)


def context_bar(tokens: int, window: Window, width: int = 30) -> str:
    """`[█████░░░░|░░░|]  4,310 / 15,200 tokens (28%)`: the warn and flush lines are marked `|`."""
    filled = min(width, round(width * tokens / window.usable))
    cells = ["█" if i < filled else "░" for i in range(width)]
    for line in (window.warn, window.flush):
        mark = min(width - 1, round(width * line))
        if mark >= filled:
            cells[mark] = "|"
    percent = round(100 * tokens / window.usable)
    return f"[{''.join(cells)}] {tokens:>6,} / {window.usable:,} tokens ({percent}%)"


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
    removed, added = old[prefix:len(old) - suffix], new[prefix:len(new) - suffix]
    parts = [f"- {short(removed, limit // 2)!r}"] if removed else []
    parts += [f"+ {short(added, limit // 2)!r}"] if added else []
    return " ".join(parts) or "(unchanged)"


class TimelineRenderer:
    """Renders events one at a time (streaming), keeping what it needs from earlier events."""

    def __init__(self, window: Window, width: int = 100, sections: bool = False):
        self.window, self.width, self.sections = window, width, sections
        self.step_number = 0
        self._last_step: tuple[int, int] | None = None
        self._purpose = "step"

    @property
    def text_width(self) -> int:
        """Room for text after the indentation."""
        return max(40, self.width - 16)

    def render(self, event: Any) -> list[str]:
        """The lines for one event (possibly none)."""
        method = getattr(self, f"_{event.type}", None)
        return method(event) if method else []

    def _header(self, e: Header) -> list[str]:
        snap = e.snapshot
        blocks = ", ".join(f"{b.label} {len(b.value)}/{b.limit}" for b in snap.blocks) or "none"
        parent = f"\nforked from {e.parent.trace} at step {e.parent.from_step}" if e.parent else ""
        return [f"trace {e.trace_id[:8]} · agent {e.agent} (spec {e.spec_hash}) · pagemind {e.runtime_version} · "
                f"schema {e.schema_version}{parent}",
                f"recorded {e.created_at:%Y-%m-%d %H:%M:%S} UTC · model {e.model.get('name')} · window "
                f"{e.model.get('context_window'):,} tokens",
                f"at the start: core blocks {blocks}; {len(snap.messages)} message(s) in the window, "
                f"{snap.recall_count} in recall"
                + (f", {snap.archival_count} archival" if snap.archival_count is not None else "")]

    def _turn(self, e: TurnEvent) -> list[str]:
        when = f" · {e.clock[0]:%a %Y-%m-%d %H:%M}" if e.clock else ""
        lines = textwrap.wrap(e.user_message, self.width - 10) or [""]
        return ["", f"turn {e.turn}{when}", f"  user › {lines[0]}", *[f"         {line}" for line in lines[1:]]]

    def _model_request(self, e: ModelRequestEvent) -> list[str]:
        auxiliary = e.purpose != "step"
        self._purpose = e.purpose
        tokens = request_tokens(e.body, self.window.encoding)
        if (e.turn, e.step) != self._last_step and not auxiliary:
            self._last_step = (e.turn, e.step)
            self.step_number += 1
            lines = [f"  step {e.step:<2} {context_bar(tokens, self.window)}"]
            if self.sections:
                parts = prompt_sections(e.body, self.window.encoding)
                text = " · ".join(f"{k} {v:,}" for k, v in parts.items() if v)
                lines += ["           " + line for line in textwrap.wrap(text, self.width - 11)]
            return lines
        kind = f"{e.purpose} call" if auxiliary else "model call again (retry after a flush)"
        return [f"    {kind} ({tokens:,} prompt tokens)"]

    def _model_response(self, e: ModelResponseEvent) -> list[str]:
        message = ((e.body.get("choices") or [{}])[0].get("message") or {})
        content = message.get("content")
        usage = f"{e.latency_ms:,.0f} ms" if e.latency_ms else ""
        if e.prompt_tokens:
            usage += f", {e.prompt_tokens:,}+{e.completion_tokens or 0:,} tokens"
        lines = []
        if content and content.strip():
            label = "model " if self._purpose == "step" else f"{self._purpose} →"
            lines.append(f"    {label} {short(content, self.text_width)}")
        if usage and self.sections:
            lines.append(f"           ({usage.strip(', ')})")
        return lines

    def _tool_call(self, e: ToolCallEvent) -> list[str]:
        return [f"    call → {e.name}({_arguments(e.arguments, self.text_width - len(e.name))})"]

    def _tool_result(self, e: ToolResultEvent) -> list[str]:
        flag = "ERROR " if e.is_error else ""
        return [f"    result ← {flag}{short(e.content, self.text_width)}"]

    def _memory_edit(self, e: MemoryEditEvent) -> list[str]:
        return [f"    memory ✎ {e.label} ({e.operation}): {_change(e.old, e.new, self.text_width)}"]

    def _event(self, e: RuntimeEvent) -> list[str]:
        d = e.data
        if e.kind == "pressure_warning":
            return [f"    ! pressure warning: the window is {d.get('percent')}% full "
                    f"({d.get('tokens', 0):,} / {d.get('usable', 0):,} tokens); the model is told to save what matters"]
        if e.kind == "flush":
            return [f"    ⇣ flush: {d.get('evicted')} message(s) evicted to recall memory, "
                    f"{d.get('tokens_before', 0):,} → {d.get('tokens_after', 0):,} tokens; summary "
                    f"{d.get('summary_tokens', 0):,} tokens; extraction {d.get('extraction')} "
                    f"({d.get('extracted', 0)} stored)"]
        details = ", ".join(f"{k}={v}" for k, v in d.items())
        return [f"    ! {e.kind}: {short(details, self.text_width)}"]

    def _step_end(self, e: StepEndEvent) -> list[str]:
        return [f"    end    turn over ({e.stop_reason})"] if e.stop_reason else []


def render_trace(header: Header, events: Iterable[Any], width: int = 100) -> list[str]:
    """The whole timeline of a trace, with prompt sections per step."""
    renderer = TimelineRenderer(Window.from_spec(header.spec), width, sections=True)
    lines = renderer.render(header)
    events = list(events)
    for index, event in enumerate(events):
        if isinstance(event, TurnEvent) and not event.clock:
            later = next((e.clock[0] for e in events[index + 1:] if e.clock), None)
            event = event.model_copy(update={"clock": [later]}) if later else event
        lines += renderer.render(event)
    return lines
