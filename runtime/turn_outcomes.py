"""How a step and a turn end: the closed set of outcomes the loop (`runtime.loop`) returns.

A step ends in `RunAgain`, `Replied`, `Stopped` or `Paused` (`StepOutcome`); a turn in a `TurnResult` with its
`StopReason`. `TurnEnd` is the turn's end known before its last step commits, for a write that commits with that
step (`EndWrite`: the daemon's inbox finish).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum

from pagemind.runtime.messages import Message
from pagemind.runtime.state.conversation.step_commit import LinkedWrite
from pagemind.tools import ToolCall


class StopReason(StrEnum):
    """Why a turn ended."""

    SEND_MESSAGE = "send_message"
    PLAIN_REPLY = "plain_reply"
    MAX_STEPS = "max_steps"
    APP_TOOL_CALLS = "app_tool_calls"  # paused: the app runs its own tools' calls (`runtime.app_calls`)


@dataclass(frozen=True)
class RunAgain:
    """The step called tools and the turn goes on."""

    messages: list[Message]


@dataclass(frozen=True)
class Replied:
    """The step answered the user: `send_message` succeeded, or the model replied in plain text."""

    reason: StopReason
    reply: str | None
    messages: list[Message]


@dataclass(frozen=True)
class Stopped:
    """The turn stopped without a reply (the step budget ran out)."""

    reason: StopReason
    messages: list[Message]


@dataclass(frozen=True)
class Paused:
    """The step called the app's tools: the turn waits for their results (the step's own calls ran). `reply`: a
    `send_message` of the same step, if one succeeded."""

    calls: tuple[ToolCall, ...]
    reply: str | None
    messages: list[Message]


StepOutcome = RunAgain | Replied | Stopped | Paused


@dataclass(frozen=True)
class TurnEnd:
    """How a turn ends, known before its last step commits: what a `LinkedWrite` committed with that step records."""

    turn_id: str
    reply: str | None
    stop_reason: StopReason
    steps: int
    app_calls: tuple[ToolCall, ...] = ()  # a turn paused for the app's calls (`runtime.app_calls`)


# Given the turn's end, another write to commit with its last step (the daemon's inbox finish), or None.
EndWrite = Callable[[TurnEnd], LinkedWrite | None]


@dataclass(frozen=True)
class TurnResult:
    """The outcome of one user turn."""

    turn_id: str
    reply: str | None
    stop_reason: StopReason
    steps: int
    messages: list[Message]
    app_calls: tuple[ToolCall, ...] = ()  # paused (`APP_TOOL_CALLS`): the calls the app must answer
