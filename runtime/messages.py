"""The message record the runtime passes around, and its OpenAI wire form."""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from pagemind.tools import ToolCall


@dataclass(frozen=True)
class Message:
    """One conversation message, stored forever in recall memory. `id` is None until committed."""

    role: str  # system | user | assistant | tool
    content: str | None
    created_at: datetime
    tool_calls: tuple[ToolCall, ...] = ()
    tool_call_id: str | None = None
    name: str | None = None
    is_error: bool = False
    id: int | None = None
    turn_id: str | None = None
    step_id: int | None = None
    in_context: bool = True
    # Per-instance memo of derived forms (wire dict, token count): messages are immutable and compiled every step.
    memo: dict[Any, Any] = field(default_factory=dict, compare=False, hash=False, repr=False)

    def to_openai(self) -> dict[str, Any]:
        """The chat-completions form of this message."""
        message: dict[str, Any] = {"role": self.role, "content": self.content}
        if self.role == "assistant" and self.tool_calls:
            # Some OpenAI-compatible servers reject `content: null` beside tool calls; "" works everywhere.
            message["content"] = self.content or ""
            message["tool_calls"] = [
                {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
                for c in self.tool_calls
            ]
        if self.role == "tool":
            message["tool_call_id"] = self.tool_call_id
        return message


def rebound(messages: Iterable[Message], copies: dict[int, Message]) -> tuple[Message, ...]:
    """`messages` with each one that `copies` names by its `id()` replaced by its copy (a held step's messages by
    their stored copies: `Window.copies`); the others as they are."""
    return tuple(copies.get(id(m), m) for m in messages)


def encode_json(value: Any) -> bytes:
    """JSON as a request body holds it: what the SDK's own serializer writes (compact separators, UTF-8 kept, no
    NaN), so a body joined from parts encoded apart is the same bytes as the whole encoded at once."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False).encode()
