"""Compact requests in traces: what a request shares with the previous one is written as references.

Successive requests of an agent repeat almost everything: the tool schemas and the window's messages (shifted by
an eviction now and then). On disk a compact request's `messages` may hold, besides whole messages,
`{"$prev": [start, stop]}` — the previous request's `messages[start:stop]`, unchanged — and `tools` may be
`{"$prev": true}`. Expanding gives back the exact body that was sent.

Shared messages are found by identity (the compiler reuses each stored message's wire dict from one request to the
next, and nothing mutates them), which costs a few microseconds; the system message, whose statistics change at
every step, is written whole.
"""

from __future__ import annotations

import operator
from typing import Any


def _run_length(messages: list[Any], start: int, previous: list[Any], index: int) -> int:
    """How many messages from `messages[start]` on are `previous[index:]`'s, in order (compared in C)."""
    same = list(map(operator.is_, messages[start:], previous[index:]))
    return same.index(False) if False in same else len(same)


def _compact_messages(messages: list[Any], previous: list[Any]) -> tuple[list[Any], bool]:
    where = {id(m): i for i, m in enumerate(previous)}
    out: list[Any] = []
    shared, position = False, 0
    while position < len(messages):
        index = where.get(id(messages[position]))
        if index is None:
            out.append(messages[position])
            position += 1
        else:
            run = _run_length(messages, position, previous, index)
            out.append({"$prev": [index, index + run]})
            shared, position = True, position + run
    return out, shared


def compact_body(body: dict[str, Any], messages: list[Any], tools: list[Any]) -> tuple[dict[str, Any], bool]:
    """The body with what it shares with the previous request (its `messages` and `tools`) written as
    references, and whether anything was."""
    compact = dict(body)
    compact["messages"], shared = _compact_messages(body["messages"], messages)
    current = body.get("tools")
    if current and len(current) == len(tools) and all(a is b for a, b in zip(current, tools, strict=True)):
        compact["tools"], shared = {"$prev": True}, True
    return (compact, True) if shared else (body, False)


def _expand_message(message: Any, previous: list[Any]) -> list[Any]:
    if not isinstance(message, dict):
        return [message]
    if "$prev" in message:
        start, stop = message["$prev"]
        if not 0 <= start < stop <= len(previous):
            raise ValueError(f"reference {message['$prev']} is outside the previous request's messages")
        return previous[start:stop]
    return [message]


def expand_body(body: dict[str, Any], previous: dict[str, Any] | None) -> dict[str, Any]:
    """The full body of a compact request, given the previous full body of the same purpose."""
    if previous is None:
        raise ValueError("it refers to an earlier request that is not in the trace")
    full = dict(body)
    full["messages"] = [m for message in body["messages"] for m in _expand_message(message, previous["messages"])]
    if body.get("tools") == {"$prev": True}:
        full["tools"] = previous.get("tools")
    return full
