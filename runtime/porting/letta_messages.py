"""A Letta agent's messages as pagemind `message` records (`runtime.porting.records`), in order: which are in the
window and which only in recall, Letta's compiled system prompt left out (pagemind compiles its own), tool calls
and their returns (one per call, each call's result once), times with their offset, and a note on what was not
kept. The rest of the agent (name, model, blocks, tools) is read by `runtime.porting.letta`, which calls
`messages_of`.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any


def messages_of(agent: dict[str, Any], notes: list[str]) -> Iterator[dict[str, Any]]:
    """The messages of a Letta agent (either schema) as `message` records; once they are all read, what did not
    map (native reasoning, unknown roles) and how many are in the window are added to `notes`."""
    messages = [m for m in agent.get("messages") or [] if isinstance(m, dict)]
    order = _in_context(agent, messages)
    window, first_in_window = set(order), (order[0] if order else None)
    writer = _Messages()
    dropped_reasoning = 0
    for index, message in enumerate(messages):
        role = message.get("role")
        if role == "system" and (index == first_in_window or _is_compiled_prompt(message, agent)):
            continue  # Letta's compiled prompt: pagemind compiles its own
        dropped_reasoning += sum(1 for p in _parts(message) if p.get("type") in ("reasoning", "redacted_reasoning"))
        yield from writer.convert(message, index in window)
    notes.append(f"messages: {writer.counts[True]} in the window, {writer.counts[False]} in recall only")
    if dropped_reasoning:
        notes.append(f"{dropped_reasoning} native reasoning part(s) not kept (pagemind keeps no reasoning)")
    if writer.skipped:
        notes.append(f"{writer.skipped} message(s) of an unknown role not imported")


def _in_context(agent: dict[str, Any], messages: list[dict[str, Any]]) -> list[int]:
    """Positions in `messages` of the window's messages, in the window's order (Letta's first: its prompt)."""
    ids = agent.get("in_context_message_ids")
    if isinstance(ids, list):
        position = {m.get("id"): i for i, m in enumerate(messages)}
        return [position[i] for i in ids if i in position]
    indices = agent.get("in_context_message_indices") or []
    return [i for i in indices if isinstance(i, int) and 0 <= i < len(messages)]


def _is_compiled_prompt(message: dict[str, Any], agent: dict[str, Any]) -> bool:
    system = str(agent.get("system") or "").strip()
    return bool(system) and _text(message).strip().startswith(system[:200])


def _parts(message: dict[str, Any]) -> list[dict[str, Any]]:
    content = message.get("content")
    if isinstance(content, list):
        return [p for p in content if isinstance(p, dict)]
    return []


def _text(message: dict[str, Any]) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    texts = [str(p.get("text") or "") for p in _parts(message) if p.get("type") == "text"]
    if not texts and isinstance(message.get("text"), str):  # the oldest files' plain `text`
        return str(message["text"])
    return "\n".join(texts)


class _Messages:
    """Letta messages to `message` records: ids in order, tool returns one per call, each call's result once."""

    def __init__(self) -> None:
        self.next_id = 1
        self.returned: set[str] = set()
        self.call_names: dict[str, str] = {}
        self.skipped = 0
        self.counts = {True: 0, False: 0}  # messages written, by whether they are in the window

    def _record(self, message: dict[str, Any], role: str, in_context: bool, **fields: Any) -> dict[str, Any]:
        record = {
            "id": self.next_id,
            "turn_id": None,
            "step_id": None,
            "role": role,
            "content": None,
            "tool_calls": None,
            "tool_call_id": None,
            "name": None,
            "is_error": False,
            "in_context": in_context,
            "created_at": _time(message.get("created_at")),
            **fields,
        }
        self.next_id += 1
        self.counts[in_context] += 1
        return record

    def convert(self, message: dict[str, Any], in_context: bool) -> Iterator[dict[str, Any]]:
        role = message.get("role")
        calls = [_call(c) for c in message.get("tool_calls") or [] if isinstance(c, dict)]
        for call in calls:
            self.call_names[call["id"]] = call["name"]
        if role in ("assistant", "approval") and calls:
            yield self._record(message, "assistant", in_context, content=_text(message) or None, tool_calls=calls)
        elif role == "assistant":
            yield self._record(message, "assistant", in_context, content=_text(message))
        elif role in ("tool", "function", "approval"):
            yield from self._returns(message, in_context)
        elif role in ("user", "system"):
            yield self._record(message, role, in_context, content=_text(message))
        else:
            self.skipped += 1

    def _returns(self, message: dict[str, Any], in_context: bool) -> Iterator[dict[str, Any]]:
        returns = [r for r in (message.get("tool_returns") or message.get("approvals") or []) if isinstance(r, dict)]
        if not returns and message.get("role") in ("tool", "function"):
            returns = [{"tool_call_id": message.get("tool_call_id"), "func_response": _text(message), "status": "ok"}]
        for item in returns:
            call_id = str(item.get("tool_call_id") or "")
            if not call_id or call_id in self.returned:
                continue
            self.returned.add(call_id)
            response = item.get("func_response")
            if response is None:
                response = item.get("reason") or json.dumps(item, ensure_ascii=False)
            yield self._record(
                message,
                "tool",
                in_context,
                content=response if isinstance(response, str) else json.dumps(response, ensure_ascii=False),
                tool_call_id=call_id,
                name=message.get("name") or self.call_names.get(call_id),
                is_error=item.get("status") == "error",
            )


def _call(call: dict[str, Any]) -> dict[str, Any]:
    function = call.get("function") or {}
    arguments = function.get("arguments")
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments if arguments is not None else {}, ensure_ascii=False)
    return {"id": str(call.get("id") or ""), "name": str(function.get("name") or ""), "arguments": arguments}


def _time(value: Any) -> str:
    """A Letta time (ISO 8601, often without an offset: UTC) as ISO with its offset."""
    try:
        parsed = datetime.fromisoformat(str(value))
    except ValueError:
        parsed = datetime(1970, 1, 1, tzinfo=UTC)
    return (parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)).isoformat()
