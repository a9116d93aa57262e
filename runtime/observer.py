"""Who hears about a turn as it unfolds: the runtime hands every event (`pagemind.runtime.events`) to one
method, `on_event`; the trace recorder, the replay comparator and the demo display implement it."""

from __future__ import annotations

from typing import Protocol

from pagemind.runtime.events import Event


class TurnObserver(Protocol):
    """Receives every event of a turn, in order.

    An observer may keep what it is given: events are frozen, and the runtime never changes an object it reported
    (a request's messages, a response's body) afterwards.
    """

    def on_event(self, event: Event) -> None:
        """One thing happened."""


class NullObserver:
    """Observes nothing."""

    def on_event(self, event: Event) -> None:
        """Ignore it."""


class ObserverGroup:
    """Passes every event to several observers, in order (e.g. a trace recorder and a live display)."""

    def __init__(self, observers: list[TurnObserver]):
        self.observers = list(observers)

    def on_event(self, event: Event) -> None:
        """Hand it to each observer."""
        for observer in self.observers:
            observer.on_event(event)
