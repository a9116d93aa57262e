"""Who hears about a turn as it unfolds: the runtime hands every event (`pagemind.runtime.events`) to one
method, `on_event`; the trace recorder, the replay comparator and the demo display implement it.

An observer that shows the reply as it is written (the daemon's event stream) says so with a true `wants_deltas`
attribute: only then is the model asked to stream (`Agent.call_model`), so a turn nobody watches live makes the
same plain request as always."""

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


def wants_deltas(observer: TurnObserver) -> bool:
    """Whether the observer wants the reply's pieces (`ReplyDeltaEvent`) as they arrive; read at each model call."""
    return bool(getattr(observer, "wants_deltas", False))


class NullObserver:
    """Observes nothing."""

    def on_event(self, event: Event) -> None:
        """Ignore it."""


class ObserverGroup:
    """Passes every event to several observers, in order (e.g. a trace recorder and a live display)."""

    def __init__(self, observers: list[TurnObserver]):
        self.observers = list(observers)

    @property
    def wants_deltas(self) -> bool:
        """Whether any of them wants the reply's pieces."""
        return any(wants_deltas(o) for o in self.observers)

    def on_event(self, event: Event) -> None:
        """Hand it to each observer."""
        for observer in self.observers:
            observer.on_event(event)


def joined(current: TurnObserver, added: TurnObserver) -> TurnObserver:
    """`added` alongside `current`: `added` alone when `current` observes nothing (no group of one)."""
    return added if isinstance(current, NullObserver) else ObserverGroup([current, added])
