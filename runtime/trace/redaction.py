"""Redacted copies of traces, for sharing bug reports: user and memory text become stable placeholders.

Every text a user or the agent's memory contributed — user messages, block values and their edits, the summary,
assistant text, tool arguments and results — is collected first; then every string in the trace is rewritten,
whole strings and embedded occurrences alike (a block value inside the system prompt), so the same text gets the
same placeholder everywhere (`«user-1»`, `«memory-2»`, `«text-3»`, numbered by first appearance). Structured
values count whole and by part (every string, and the keys of a field that is a mapping: a profile names people
by key), and whatever a compiled prompt quotes as data (block values, the summary, retrieved memories, archival
tags, found by the compiler's delimiters) counts as memory even where no other line of the trace carries it. The
trace's structure stays: event types, roles, tool names, ids, labels, times, token counts and the agent's
instructions. `tests/runtime/trace/test_redaction_canaries.py` plants a canary in every place a trace carries text.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pagemind.runtime.trace.format import LINE_ADAPTER
from pagemind.runtime.trace.reader import Trace
from pagemind.runtime.trace.recorder import TraceWriter

# Fields that carry structure, not user text: never rewritten (a user who types "user" must not break roles).
PROTECTED = frozenset(
    {
        "type",
        "role",
        "name",
        "id",
        "call_id",
        "tool_call_id",
        "label",
        "operation",
        "kind",
        "model",
        "object",
        "finish_reason",
        "trace_id",
        "agent",
        "spec_hash",
        "runtime_version",
        "turn_id",
        "stop_reason",
        "api_key_env",
        "encoding",
        "tool_choice",
        "tools",
        "clock",
        "created_at",
        "at",
        "schema_version",
        "system",
        "description",
        "base_url",
        "parent",
    }
)
_MIN_EMBEDDED = 3  # shorter texts are replaced only where they are a whole field


class Redactor:
    """Collects sensitive texts with a kind, then rewrites strings with stable numbered placeholders."""

    def __init__(self) -> None:
        self.placeholders: dict[str, str] = {}
        self.counts: dict[str, int] = {}
        self._pattern: re.Pattern[str] | None = None

    def add(self, text: Any, kind: str) -> None:
        """Mark `text` (and each of its lines) as sensitive; a mapping or list (a structured block's seed), or text
        that is a JSON object or array (a structured block's value), marks every string and key inside it too."""
        if isinstance(text, (dict, list)):
            self.add_json(text, kind)
            return
        if not isinstance(text, str) or not text.strip():
            return
        parsed = _loads(text) if text.lstrip()[:1] in ("{", "[") else None
        if isinstance(parsed, (dict, list)):
            self.add_json(parsed, kind)
        for piece in [text, *(line for line in text.splitlines() if line.strip())]:
            if piece not in self.placeholders:
                self.counts[kind] = self.counts.get(kind, 0) + 1
                self.placeholders[piece] = f"«{kind}-{self.counts[kind]}»"
        self._pattern = None

    def add_arguments(self, raw: str | None, kind: str = "text") -> None:
        """Mark the string values inside a tool call's JSON arguments, and the keys of the objects nested in them
        (a structured block's changes name people by key: {"people": {"Leo": …}})."""
        parsed = _loads(raw)
        if isinstance(parsed, dict):
            for name, value in parsed.items():
                if name not in PROTECTED:
                    self.add_json(value, kind)

    def add_json(self, data: Any, kind: str) -> None:
        """Mark every string and every object key inside a JSON value."""
        for text in _json_strings(data, keys=True):
            self.add(text, kind)

    def add_sections(self, text: str) -> None:
        """Mark the data a compiled prompt quotes (block values, the summary, retrieved memories, archival tags) as
        memory: found by the compiler's own delimiters, so memory reaches no prompt unredacted even where nothing
        else in the trace carries it (a trace recorded before reads were)."""
        for pattern in _DATA_SECTIONS:
            for match in pattern.finditer(text):
                for piece in match.group(1).split("\n"):
                    self.add(piece.removeprefix("- ").strip(), "memory")
                self.add(match.group(1), "memory")

    def _regex(self) -> re.Pattern[str]:
        if self._pattern is None:
            texts = sorted((t for t in self.placeholders if len(t) >= _MIN_EMBEDDED), key=len, reverse=True)
            parts = [
                (r"(?<!\w)" if t[0].isalnum() else "") + re.escape(t) + (r"(?!\w)" if t[-1].isalnum() else "")
                for t in texts
            ]
            self._pattern = re.compile("|".join(parts)) if parts else re.compile(r"(?!x)x")
        return self._pattern

    def text(self, value: str) -> str:
        """`value` with every sensitive text in it replaced."""
        if value in self.placeholders:
            return self.placeholders[value]
        return self._regex().sub(lambda m: self.placeholders[m.group(0)], value)

    def key(self, name: str) -> str:
        """A mapping's key: a placeholder when the key itself is sensitive text (a name a profile is keyed by)."""
        return self.placeholders.get(name, name) if name not in PROTECTED else name

    def value(self, data: Any, key: str | None = None) -> Any:
        """A JSON value rewritten deeply; protected fields and tool-argument JSON are handled specially."""
        if key in PROTECTED:
            return data
        if isinstance(data, str):
            if key == "arguments":
                parsed = _loads(data)
                if isinstance(parsed, (dict, list)):
                    return json.dumps(self.value(parsed), ensure_ascii=False)
            return self.text(data)
        if isinstance(data, dict):
            return {self.key(k): self.value(v, k) for k, v in data.items()}
        if isinstance(data, list):
            return [self.value(v, None) for v in data]
        return data


def _loads(raw: str | None) -> Any:
    try:
        return json.loads(raw) if raw else None
    except (json.JSONDecodeError, TypeError):
        return None


def _json_strings(data: Any, keys: bool = False, depth: int = 1) -> list[str]:
    """Every string inside a JSON value; with `keys`, also the keys of the objects one level down: a structured
    value's own keys are its schema's field names, the keys of a field that is a mapping are data ("people" →
    "Leo"), and below that are field names again."""
    if isinstance(data, str):
        return [data]
    if isinstance(data, dict):
        found = [k for k in data if keys and depth == 2 and k not in PROTECTED]
        return found + [s for k, v in data.items() if k not in PROTECTED for s in _json_strings(v, keys, depth + 1)]
    if isinstance(data, list):
        return [s for v in data for s in _json_strings(v, keys, depth)]
    return []


# The data a compiled prompt quotes, by the compiler's delimiters (`runtime/compiler.py`; quoted memory never
# holds "</", so a section ends where its closing tag is).
_DATA_SECTIONS = (
    re.compile(r"<value>\n(.*?)\n</value>", re.DOTALL),
    re.compile(r"<conversation_summary>\n[^\n]*\n(.*?)\n</conversation_summary>", re.DOTALL),
    re.compile(r"<retrieved_memories>\n[^\n]*\n(.*?)\n</retrieved_memories>", re.DOTALL),
    re.compile(r"^Archival memory: \d+ memories \(tags: (.*?)\); search with archival_search\.$", re.MULTILINE),
    re.compile(r"^Reminder of hard constraints \(always apply\): (.*)$", re.MULTILINE),
)


def _memory_texts(data: Any) -> list[str]:
    """The texts and tags of the records or messages in a read's result, however nested."""
    if isinstance(data, list):
        return [t for v in data for t in _memory_texts(v)]
    if not isinstance(data, dict):
        return []
    found = [data["text"]] if isinstance(data.get("text"), str) else []
    found += [t for t in data.get("tags") or [] if isinstance(t, str)]
    return found + [t for k, v in data.items() if k not in ("text", "tags") for t in _memory_texts(v)]


def _collect_message(redactor: Redactor, message: dict[str, Any]) -> None:
    role = message.get("role")
    if role in ("user", "assistant", "tool"):
        redactor.add(message.get("content"), "user" if role == "user" else "text")
    for call in message.get("tool_calls") or ():
        redactor.add_arguments((call.get("function") or call).get("arguments"))


def _collect(redactor: Redactor, event: dict[str, Any]) -> None:
    def model_response(e: dict[str, Any]) -> None:
        for c in e["body"].get("choices") or []:
            _collect_message(redactor, (c.get("message") or {}))

    def memory_edit(e: dict[str, Any]) -> None:
        redactor.add(e["old"], "memory")
        redactor.add(e["new"], "memory")

    def memory_read(e: dict[str, Any]) -> None:  # the memories (and messages) a turn read, and what it asked
        for text in _memory_texts(e["result"]):
            redactor.add(text, "memory")
        if e["read"] == "stats":  # (count, tags)
            redactor.add_json(e["result"], "memory")
        for key in ("text", "query"):
            redactor.add(e["request"].get(key), "user")

    def model_request(e: dict[str, Any]) -> None:
        # The conversation a request carries is user, memory or tool text whatever the purpose (a summary's or an
        # extraction's request quotes the messages it condenses, in its own layout); its system text is the
        # runtime's, less the data it quotes.
        for message in e["body"].get("messages") or []:
            if isinstance(message, dict):
                _collect_message(redactor, message)
        for text in _json_strings({k: v for k, v in e["body"].items() if k != "tools"}):
            redactor.add_sections(text)

    collectors: dict[str, Callable[[dict[str, Any]], None]] = {
        "header": lambda e: _collect_header(redactor, e),
        "model_request": model_request,
        "turn": lambda e: redactor.add(e["user_message"], "user"),
        "model_response": model_response,
        "tool_call": lambda e: redactor.add_arguments(e["arguments"]),
        "tool_result": lambda e: redactor.add(e["content"], "text"),
        "memory_edit": memory_edit,
        "memory_read": memory_read,
    }
    collect = collectors.get(event["type"])
    if collect:
        collect(event)


def _collect_header(redactor: Redactor, header: dict[str, Any]) -> None:
    snapshot = header["snapshot"]
    for block in snapshot["blocks"]:
        redactor.add(block["value"], "memory")
    for block in header["spec"].get("blocks") or []:
        redactor.add(block.get("value"), "memory")
    redactor.add(snapshot.get("summary"), "memory")
    for message in snapshot["messages"]:
        _collect_message(redactor, message)


def redact_trace(trace: Trace, out: Path) -> Redactor:
    """Write a redacted copy of `trace` (whole steps only) to `out`; returns the redactor (its placeholder map)."""
    events = [LINE_ADAPTER.dump_python(line, mode="json") for line in (trace.header, *trace.events)]
    redactor = Redactor()
    # Memory and user text first, so their placeholders say so; then everything else, in order of appearance.
    first = ("header", "memory_edit", "memory_read", "turn", "model_request")
    for event in [e for e in events if e["type"] in first] + [e for e in events if e["type"] not in first]:
        _collect(redactor, event)
    writer = TraceWriter(out)
    try:
        for event in events:
            rewritten = redactor.value(event)
            if rewritten["type"] == "header":
                rewritten["redacted"] = True
            writer.write(LINE_ADAPTER.validate_python(rewritten))
    finally:
        writer.close()
    return redactor
