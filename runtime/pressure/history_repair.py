"""History repair: before every model call, make the in-context messages a valid conversation again.

Every tool call needs its result and every result its call. A call left without a result (say, a crash between
the call and its result) gets an explicit error result; a result whose call is not in the window leaves the
window (it stays in recall memory). An assistant message with neither text nor tool calls (stored before responses
were validated, e.g. `content: null` from a response with no choices) leaves the window too: strict providers
reject it on every later request (`expected a string, got null`), and inventing text for it would put words in the
model's mouth; it stays in recall memory. An agent can never be bricked by its own history.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from pagemind.runtime.messages import Message, rebound

MISSING_RESULT = (
    "Error: no result was recorded for this tool call (the run was interrupted before it finished). "
    "Call the tool again if it is still needed."
)


@dataclass(frozen=True)
class Repair:
    """The repaired window and what changed: synthetic results to store, messages to take out of context."""

    messages: list[Message]
    added: list[Message] = field(default_factory=list)
    dropped: list[Message] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        """Whether anything had to be repaired."""
        return bool(self.added or self.dropped)


def is_valid(messages: Sequence[Message]) -> bool:
    """Whether the window needs no repair: the check alone, one tight pass that builds nothing (it runs before
    every model call, over every message in view; the repair itself is rare)."""
    open_calls: set[str] = set()
    for message in messages:
        role = message.role
        if role == "tool":
            if message.tool_call_id not in open_calls:
                return False
            open_calls.discard(message.tool_call_id)
            continue
        if open_calls:
            return False
        if role == "assistant":
            if message.tool_calls:
                open_calls = {c.id for c in message.tool_calls}
                if len(open_calls) != len(message.tool_calls):
                    return False  # a repeated call id: let the repair say so
            elif not (message.content or "").strip():
                return False
    return not open_calls


@dataclass
class ValidityMemo:
    """The last window found valid, so that the next check reads only what changed (the check runs before every
    model call, over the whole window). Steps append at the end and flushes drop from the front: a window that is
    a run of the last valid one to its end (the same objects, messages are immutable), plus new messages, is
    valid if the run does not start with a tool result and the new messages are valid on their own (a valid
    window ends with every call answered, so the new part starts from a clean state). Anything else is checked
    whole."""

    messages: tuple[Message, ...] = ()

    def rebind(self, copies: dict[int, Message]) -> None:
        """Messages replaced by equal copies (`Window.copies`): the copies are as valid as what they replace."""
        self.messages = rebound(self.messages, copies)

    def is_valid(self, messages: Sequence[Message]) -> bool:
        """`is_valid(messages)`, remembering the answer for the next call."""
        old, new = self.messages, 0
        if old and messages and messages[0].role != "tool":
            first = messages[0]
            start = next((i for i, m in enumerate(old) if m is first), -1)
            kept = len(old) - start
            if start >= 0 and kept <= len(messages) and all(map(operator.is_, old[start:], messages[:kept])):
                new = kept
        valid = is_valid(messages[new:]) if new else is_valid(messages)
        self.messages = tuple(messages) if valid else ()
        return valid


def repair_history(messages: Sequence[Message], now: datetime) -> Repair:
    """Check and repair the window; returns the input unchanged (same list contents) when it is valid."""
    if is_valid(messages):
        return Repair(list(messages))
    repaired: list[Message] = []
    added: list[Message] = []
    dropped: list[Message] = []
    problems: list[str] = []
    open_calls: dict[str, str] = {}  # call id → tool name, for the current assistant group

    def close_group() -> None:
        for call_id, name in open_calls.items():
            result = Message("tool", MISSING_RESULT, now, tool_call_id=call_id, name=name, is_error=True)
            repaired.append(result)
            added.append(result)
            problems.append(f"tool call {call_id} ({name}) had no result")
        open_calls.clear()

    for message in messages:
        if message.role == "tool":
            if message.tool_call_id in open_calls:
                open_calls.pop(message.tool_call_id)
                repaired.append(message)
            else:
                dropped.append(message)
                problems.append(f"tool result {message.tool_call_id} has no matching call before it")
            continue
        close_group()
        if message.role == "assistant" and not message.tool_calls and not (message.content or "").strip():
            dropped.append(message)
            problems.append(f"assistant message {message.id} has neither content nor tool calls")
            continue
        repaired.append(message)
        if message.role == "assistant":
            open_calls.update({c.id: c.name for c in message.tool_calls})
    close_group()
    return Repair(repaired, added, dropped, problems)
