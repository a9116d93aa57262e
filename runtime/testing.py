"""Scripted models for tests, benchmarks and the demo (in the spirit of pydantic-ai's TestModel/FunctionModel).

They implement `ModelClient` directly, with no HTTP: `ScriptedModel` serves a list of responses in order;
`FunctionModel` answers with a function of the request.
"""

from __future__ import annotations

import json
import uuid
from typing import Any, Callable

from pagemind.runtime.model_client import ModelRequest, ModelResponse, response_from_body


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
    return {"id": call_id or f"call_{uuid.uuid4().hex[:10]}", "type": "function",
            "function": {"name": name, "arguments": raw}}


def tool_calls_body(*calls: dict[str, Any], content: str | None = None) -> dict[str, Any]:
    """A chat-completions body whose message carries these tool calls."""
    return _body({"role": "assistant", "content": content, "tool_calls": list(calls)}, "tool_calls")


def tool_call_body(name: str, arguments: dict[str, Any] | str | None = None, call_id: str | None = None) -> dict[str, Any]:
    """A chat-completions body with a single tool call."""
    return tool_calls_body(call(name, arguments, call_id))


def reply_body(text: str) -> dict[str, Any]:
    """A chat-completions body with a plain assistant reply."""
    return _body({"role": "assistant", "content": text}, "stop")


class ScriptedModel:
    """Serves the given response bodies in order and keeps every request; fails loudly when it runs out."""

    def __init__(self, bodies: list[dict[str, Any]] | None = None):
        self.bodies = list(bodies or [])
        self.requests: list[ModelRequest] = []

    def add(self, *bodies: dict[str, Any]) -> None:
        """Queue more responses."""
        self.bodies.extend(bodies)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """The next scripted response."""
        self.requests.append(request)
        if not self.bodies:
            raise AssertionError(f"scripted model has no response left for request #{len(self.requests)}")
        return response_from_body(self.bodies.pop(0))


class FunctionModel:
    """Answers each request with `function(request)`, which returns a response body."""

    def __init__(self, function: Callable[[ModelRequest], dict[str, Any]]):
        self.function = function
        self.requests: list[ModelRequest] = []

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """The function's answer."""
        self.requests.append(request)
        return response_from_body(self.function(request))
