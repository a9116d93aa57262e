"""Who hears about a turn as it unfolds: the runtime hands every event (`pagemind.runtime.events`) to one
method, `on_event`; the trace recorder, the replay comparator and the demo display implement it."""

from __future__ import annotations

from typing import Any, Protocol

from pagemind.blocks import BlockEdit
from pagemind.runtime.events import (
    Event, FlushEvent, HistoryRepairEvent, MemoryEditEvent, ModelRequestEvent, ModelResponseEvent,
    PressureWarningEvent, StepEndEvent, ToolCallEvent, ToolResultEvent, TurnEvent, Flush, HistoryRepair,
    PressureWarning,
)
from pagemind.runtime.model_client import ModelRequest, ModelResponse
from pagemind.tools import ToolCall, ToolResult


class LegacyHooks:
    """TEMPORARY, until the loop, the agent and the monitor call `on_event` themselves: turns the old per-kind
    callbacks they still make into events."""

    def on_event(self, event: Event) -> None:  # pragma: no cover - every observer defines it
        raise NotImplementedError

    def turn_started(self, agent: Any, turn_id: str, user_message: str) -> None:  # noqa: D102
        self.on_event(TurnEvent(step=0, turn_id=turn_id, user_message=user_message))

    def model_request(self, step: int, request: ModelRequest) -> None:  # noqa: D102
        self.on_event(ModelRequestEvent.from_request(step, request))

    def model_response(self, step: int, response: ModelResponse) -> None:  # noqa: D102
        self.on_event(ModelResponseEvent.from_response(step, response))

    def tool_call(self, step: int, call: ToolCall) -> None:  # noqa: D102
        self.on_event(ToolCallEvent.from_call(step, call))

    def tool_result(self, step: int, result: ToolResult) -> None:  # noqa: D102
        self.on_event(ToolResultEvent.from_result(step, result))

    def memory_edit(self, step: int, edit: BlockEdit) -> None:  # noqa: D102
        self.on_event(MemoryEditEvent.from_edit(step, edit))

    def event(self, step: int, kind: str, data: dict[str, Any]) -> None:  # noqa: D102
        if kind == "flush":
            self.on_event(FlushEvent(step=step, data=Flush(**data)))
        elif kind == "pressure_warning":
            self.on_event(PressureWarningEvent(step=step, data=PressureWarning(**data)))
        else:
            self.on_event(HistoryRepairEvent(step=step, data=HistoryRepair(**data)))

    def step_end(self, step: int, stop_reason: str | None) -> None:  # noqa: D102
        self.on_event(StepEndEvent(step=step, stop_reason=stop_reason))


class TurnObserver(Protocol):
    """Receives every event of a turn, in order.

    An observer may keep what it is given: events are frozen, and the runtime never changes an object it reported
    (a request's messages, a response's body) afterwards.
    """

    def on_event(self, event: Event) -> None:
        """One thing happened."""


class NullObserver(LegacyHooks):
    """Observes nothing."""

    def on_event(self, event: Event) -> None:
        """Ignore it."""


class ObserverGroup(LegacyHooks):
    """Passes every event to several observers, in order (e.g. a trace recorder and a live display)."""

    def __init__(self, observers: list[TurnObserver]):
        self.observers = list(observers)

    def on_event(self, event: Event) -> None:
        """Hand it to each observer."""
        for observer in self.observers:
            observer.on_event(event)
