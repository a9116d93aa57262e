"""An app's own tools for one turn (the OpenAI proxy's `tools`): offered to the model beside the agent's own, never
run by pagemind. A step that calls one pauses the turn (`runtime.turn_outcomes.Paused`): its other calls run and
commit with it, and the app's calls stay open until the app sends their results, which resume the turn where it
paused.

- **No split pair is ever left behind**: a turn that begins while calls are open (the app sent a new message, not
  their results) first stores a result for each open call: the app's own where it sent one, else `NO_RESULT`, so a
  strict provider never sees a call without its result.
- **Once**: a result is stored only for a call still open, so results sent again (a retry) add nothing; results
  whose calls are answered already name the turn that took them, and resume or return it as stored.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pagemind.runtime.messages import Message
from pagemind.runtime.window import Window
from pagemind.tools import ToolCall

NO_RESULT = "Error: the app returned no result for this tool call (it went on without answering it)."


@dataclass(frozen=True)
class AppTools:
    """The app's function tools for one run, and the results it sent for the paused turn's calls.

    `schemas` are OpenAI tool entries (`{"type": "function", "function": {...}}`); `results` maps a call id to the
    app's result text; `forced` names the function the app's `tool_choice` forces (OpenAI's semantics: the answer
    to the request is a call to it, so the run's first step is sent with that `tool_choice`)."""

    schemas: tuple[dict[str, Any], ...] = ()
    results: Mapping[str, str] = field(default_factory=dict)
    forced: str | None = None  # the app's function its `tool_choice` names: the run's first step must call it

    @property
    def tool_choice(self) -> dict[str, Any] | None:
        """The first step's `tool_choice` when the app forces a call (None: the model chooses)."""
        if self.forced is None or self.forced not in self.names:
            return None
        return {"type": "function", "function": {"name": self.forced}}

    def chosen(self) -> AppTools:
        """These tools for the run's later steps: the forced call was made (it paused the turn) or refused."""
        return AppTools(self.schemas, self.results) if self.forced is not None else self

    @property
    def names(self) -> frozenset[str]:
        """The names of the app's functions."""
        return frozenset(name_of(s) for s in self.schemas)

    def beside(self, own: Mapping[str, object]) -> AppTools:
        """These tools without any whose name is one of the agent's own (`own`): the agent's tools win a clash (the
        proxy refuses one up front; an MCP server's tools are known only at the turn)."""
        if own.keys().isdisjoint(self.names):
            return self
        return AppTools(tuple(s for s in self.schemas if name_of(s) not in own), self.results, self.forced)


def name_of(schema: dict[str, Any]) -> str:
    """The function name of an OpenAI tool entry."""
    return str((schema.get("function") or {}).get("name"))


NO_APP_TOOLS = AppTools()


@dataclass(frozen=True)
class OpenCalls:
    """The calls a paused turn handed to the app and has no result for yet."""

    turn_id: str
    calls: tuple[ToolCall, ...]


def open_calls(messages: list[Message]) -> OpenCalls | None:
    """The open app calls at the end of `messages` (a window, or one turn's messages): the last assistant message's
    calls without a result after it; None when every call is answered. Only a paused step leaves calls open (a step
    commits its calls and their results together)."""
    answered: set[str] = set()
    for message in reversed(messages):
        if message.role == "tool" and message.tool_call_id:
            answered.add(message.tool_call_id)
        elif message.role == "assistant":
            calls = tuple(c for c in message.tool_calls if c.id not in answered)
            if not calls or message.turn_id is None:
                return None
            return OpenCalls(message.turn_id, calls)
        elif message.role != "system":
            return None
    return None


def results_for(paused: OpenCalls, results: Mapping[str, str], at: Any) -> list[Message]:
    """One tool message per open call: the app's result where it sent one, else `NO_RESULT` (an error result)."""
    return [
        Message(
            "tool",
            results.get(call.id, NO_RESULT),
            at,
            tool_call_id=call.id,
            name=call.name,
            is_error=call.id not in results,
            turn_id=paused.turn_id,
        )
        for call in paused.calls
    ]


def answered_turn(window: Window, call_ids: Mapping[str, str]) -> str | None:
    """The turn whose stored results answer these call ids (results sent again), if one in view does."""
    for message in reversed(window.messages):
        if message.role == "tool" and message.tool_call_id in call_ids and message.turn_id:
            return message.turn_id
    return None


class NothingToResume(ValueError):
    """A run with neither a user message nor results for calls the agent handed out."""
