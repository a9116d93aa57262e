"""Hooks the loop calls as a turn unfolds; the trace recorder implements them, the default ignores them."""

from __future__ import annotations

from typing import Any, Protocol

from pagemind.blocks import BlockEdit
from pagemind.runtime.model_client import ModelRequest, ModelResponse
from pagemind.tools import ToolCall, ToolResult


class TurnObserver(Protocol):
    """Receives every request, response, tool call, result, memory edit and step end, in order.

    An observer may keep what it is given: the runtime never changes a reported object afterwards (the trace
    recorder builds its events from them at the step's end).
    """

    def turn_started(self, agent: Any, turn_id: str, user_message: str) -> None: ...
    def model_request(self, step: int, request: ModelRequest) -> None: ...
    def model_response(self, step: int, response: ModelResponse) -> None: ...
    def tool_call(self, step: int, call: ToolCall) -> None: ...
    def tool_result(self, step: int, result: ToolResult) -> None: ...
    def memory_edit(self, step: int, edit: BlockEdit) -> None: ...
    def event(self, step: int, kind: str, data: dict[str, Any]) -> None: ...
    def step_end(self, step: int, stop_reason: str | None) -> None: ...


class NullObserver:
    """Observes nothing."""

    def turn_started(self, agent: Any, turn_id: str, user_message: str) -> None: ...
    def model_request(self, step: int, request: ModelRequest) -> None: ...
    def model_response(self, step: int, response: ModelResponse) -> None: ...
    def tool_call(self, step: int, call: ToolCall) -> None: ...
    def tool_result(self, step: int, result: ToolResult) -> None: ...
    def memory_edit(self, step: int, edit: BlockEdit) -> None: ...
    def event(self, step: int, kind: str, data: dict[str, Any]) -> None: ...
    def step_end(self, step: int, stop_reason: str | None) -> None: ...


class ObserverGroup:
    """Passes every callback to several observers, in order (e.g. a trace recorder and a live display)."""

    def __init__(self, observers: list[TurnObserver]):
        self.observers = list(observers)

    def turn_started(self, agent: Any, turn_id: str, user_message: str) -> None:
        """A turn started."""
        for o in self.observers:
            o.turn_started(agent, turn_id, user_message)

    def model_request(self, step: int, request: ModelRequest) -> None:
        """A request is about to be sent."""
        for o in self.observers:
            o.model_request(step, request)

    def model_response(self, step: int, response: ModelResponse) -> None:
        """A response arrived."""
        for o in self.observers:
            o.model_response(step, response)

    def tool_call(self, step: int, call: ToolCall) -> None:
        """A tool is about to be called."""
        for o in self.observers:
            o.tool_call(step, call)

    def tool_result(self, step: int, result: ToolResult) -> None:
        """A tool answered."""
        for o in self.observers:
            o.tool_result(step, result)

    def memory_edit(self, step: int, edit: BlockEdit) -> None:
        """A core-memory edit was committed."""
        for o in self.observers:
            o.memory_edit(step, edit)

    def event(self, step: int, kind: str, data: dict[str, Any]) -> None:
        """A runtime event happened."""
        for o in self.observers:
            o.event(step, kind, data)

    def step_end(self, step: int, stop_reason: str | None) -> None:
        """A step was committed."""
        for o in self.observers:
            o.step_end(step, stop_reason)
