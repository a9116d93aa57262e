"""Who hears about a turn as it unfolds: the runtime hands every event (`pagemind.runtime.events`) to one
method, `on_event`; the trace recorder, the replay comparator and the demo display implement it.

An observer that shows the reply as it is written (the daemon's event stream) says so with a true `wants_deltas`
attribute: only then is the model asked to stream (`Agent.call_model`), so a turn nobody watches live makes the
same plain request as always.

An agent has its own observer (`Agent.observer`: whoever watches it for as long as it is loaded, the trace
recorder, say); a run can add one for itself alone with `observing` (the daemon's run stream). That one is bound to
the run's task context, never set on the agent: agents sharing an event loop never see each other's run
observers, and nothing is left to undo when the run ends.

An observer that notes the agent clock's readings (the trace recorder, so a replay can be served the same times)
has a `note_clock(value)` method: the agent's clock (`HeardClock`) hands each reading to whoever hears the agent
then, so nothing swaps the agent's clock to listen to it."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from datetime import datetime
from typing import Any, Protocol

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


def wants_reads(observer: TurnObserver) -> bool:
    """Whether the observer wants what the turn reads from external memory (`MemoryReadEvent`): the trace
    recorder does, so a replay can be served the same reads; read at each read, so nobody else pays for them."""
    return bool(getattr(observer, "wants_reads", False))


def clock_notes(observer: TurnObserver) -> Callable[[datetime], None] | None:
    """The observer's `note_clock`, if it notes the agent clock's readings; read at each reading."""
    note = getattr(observer, "note_clock", None)
    return note if callable(note) else None


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

    @property
    def wants_reads(self) -> bool:
        """Whether any of them wants the external-memory reads."""
        return any(wants_reads(o) for o in self.observers)

    def on_event(self, event: Event) -> None:
        """Hand it to each observer."""
        for observer in self.observers:
            observer.on_event(event)

    def note_clock(self, value: datetime) -> None:
        """Hand a clock reading to each observer that notes them."""
        for observer in self.observers:
            if (note := clock_notes(observer)) is not None:
                note(value)


def joined(current: TurnObserver, added: TurnObserver) -> TurnObserver:
    """`added` alongside `current`: `added` alone when `current` observes nothing (no group of one)."""
    return added if isinstance(current, NullObserver) else ObserverGroup([current, added])


_RUN_OBSERVER: ContextVar[TurnObserver | None] = ContextVar("pagemind_run_observer", default=None)


@contextlib.contextmanager
def observing(observer: TurnObserver) -> Iterator[None]:
    """Hand the events of whatever runs inside (a turn, a job) to `observer` too, in this task's context and the
    tasks it starts."""
    bound = _RUN_OBSERVER.set(observer)
    try:
        yield
    finally:
        _RUN_OBSERVER.reset(bound)


def listener(own: TurnObserver) -> TurnObserver:
    """Who hears an event now: the agent's own observer, joined by the current run's (`observing`) if any."""
    run = _RUN_OBSERVER.get()
    return own if run is None else joined(own, run)


class HeardClock:
    """An agent's clock: reads `inner` and hands each reading to whoever notes them among those who hear the agent
    now (`hears`: the agent's observer joined by the run's, set by the agent). Other attributes are `inner`'s (a
    test's `ManualClock.advance`)."""

    def __init__(self, inner: Callable[[], datetime]):
        self.inner = inner
        self.hears: Callable[[], TurnObserver] = lambda: _RUN_OBSERVER.get() or NullObserver()

    def __call__(self) -> datetime:
        value = self.inner()
        if (note := clock_notes(self.hears())) is not None:
            note(value)
        return value

    def __getattr__(self, name: str) -> Any:
        if name == "inner":  # not set yet (a copy being built): no recursion through `self.inner`
            raise AttributeError(name)
        return getattr(self.inner, name)
