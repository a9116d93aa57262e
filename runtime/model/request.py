"""One chat-completions request as sent, and its body's bytes, joined from parts encoded once.

A step's body is mostly what the previous step's was: the same messages (the compiler keeps each one's JSON) and
the same tool schemas (built once per tool). Encoding the whole body again on every call grows with the window and
costs ~0.1 ms for the companion's tools alone, so only the few scalar fields are encoded per call and the rest is
joined in as bytes, the same bytes `encode_json(request.body())` gives.
"""

from __future__ import annotations

import operator
from dataclasses import dataclass, field
from typing import Any

from pagemind.runtime.messages import encode_json


@dataclass(frozen=True)
class ModelRequest:
    """One chat-completions request, as sent."""

    model: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    temperature: float
    max_tokens: int
    purpose: str = "step"  # step | summarize | extract: not sent; lets scripted models and traces tell calls apart
    # `messages` already as JSON, one entry each (the compiler keeps them per message): the body is joined from
    # them instead of encoding the whole window again on every call. Must match `messages`; None: encode them.
    encoded_messages: tuple[bytes, ...] | None = field(default=None, compare=False, repr=False)
    # The provider's structured-output format (`{"type": "json_schema", ...}`), sent only when set.
    response_format: dict[str, Any] | None = None
    # A forced call (`{"type": "function", "function": {"name": ...}}`: an app's `tool_choice`); None: "auto".
    tool_choice: dict[str, Any] | None = None

    def body(self) -> dict[str, Any]:
        """The JSON body (without transport details)."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": self.messages,
            "temperature": self.temperature,
            "max_tokens": self.max_tokens,
        }
        if self.tools:
            body["tools"] = self.tools
            body["tool_choice"] = self.tool_choice or "auto"
        if self.response_format is not None:
            body["response_format"] = self.response_format
        return body

    def encoded(self, extra: dict[str, Any] | None = None) -> bytes:
        """The body as sent: compact JSON, UTF-8, exactly `encode_json(self.body())` (with `extra`'s keys after
        the body's: a streamed request's `stream` options)."""
        body = self.body()
        joined = self.encoded_messages is not None and len(self.encoded_messages) == len(self.messages)
        if (not joined and not self.tools) or (extra and not extra.keys().isdisjoint(body)):
            return encode_json({**body, **extra} if extra else body)
        # Compact JSON of an object is its members joined by commas: the body is written member by member, in the
        # order of `body()`, the big ones joined in from bytes encoded before.
        messages = (
            b"".join((b"[", b",".join(self.encoded_messages or ()), b"]")) if joined else encode_json(self.messages)
        )
        members = [
            _members({"model": self.model}),
            b'"messages":' + messages,
            _members({"temperature": self.temperature, "max_tokens": self.max_tokens}),
        ]
        if self.tools:
            choice = encode_json(self.tool_choice) if self.tool_choice else b'"auto"'
            members += [b'"tools":' + tools_json(self.tools), b'"tool_choice":' + choice]
        tail = {"response_format": self.response_format} if self.response_format is not None else {}
        if tail or extra:
            members.append(_members({**tail, **(extra or {})}))
        return b"".join((b"{", b",".join(members), b"}"))


def _members(value: dict[str, Any]) -> bytes:
    """The members of a non-empty object, as its compact JSON holds them (without the braces)."""
    return encode_json(value)[1:-1]


_TOOLS_JSON: dict[tuple[int, ...], tuple[tuple[dict[str, Any], ...], bytes]] = {}


def tools_json(tools: list[dict[str, Any]]) -> bytes:
    """The JSON of a list of tool schemas. Schemas are built once per tool and never changed, so the bytes are
    cached by the schemas' identity (the cache holds the schemas, so an id is never recycled while cached)."""
    key = tuple(map(id, tools))
    cached = _TOOLS_JSON.get(key)
    if cached is not None and all(map(operator.is_, cached[0], tools)):
        return cached[1]
    data = encode_json(tools)
    if len(_TOOLS_JSON) > 256:  # tool sets are few; this only guards against unbounded growth
        _TOOLS_JSON.clear()
    _TOOLS_JSON[key] = (tuple(tools), data)
    return data
