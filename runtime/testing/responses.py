"""Chat-completions response bodies, as a provider would send them: a plain reply, or tool calls.

The scripted models (`testing.models`) and the scripted endpoint (`testing.endpoint`) serve these bodies.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

Body = dict[str, Any]
"""A chat-completions response body."""


def _body(message: dict[str, Any], finish_reason: str) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion",
        "created": 0,
        "model": "scripted",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    }


def call(name: str, arguments: dict[str, Any] | str | None = None, call_id: str | None = None) -> dict[str, Any]:
    """One tool call entry; `arguments` may be a raw (even broken) JSON string."""
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments or {})
    return {
        "id": call_id or f"call_{uuid.uuid4().hex[:10]}",
        "type": "function",
        "function": {"name": name, "arguments": raw},
    }


def tool_calls_body(*calls: dict[str, Any], content: str | None = None) -> dict[str, Any]:
    """A chat-completions body whose message carries these tool calls (built with `call`)."""
    return _body({"role": "assistant", "content": content, "tool_calls": list(calls)}, "tool_calls")


def tool_call_body(
    name: str, arguments: dict[str, Any] | str | None = None, call_id: str | None = None
) -> dict[str, Any]:
    """A chat-completions body with a single tool call."""
    return tool_calls_body(call(name, arguments, call_id))


def reply_body(text: str) -> dict[str, Any]:
    """A chat-completions body with a plain assistant reply."""
    return _body({"role": "assistant", "content": text}, "stop")
