"""A run's live events and its end, for whoever waits in this process.

The daemon gives each run's agent an observer that hands every event (`runtime.events`) to the run's subscribers
(`Daemon.events`), and marks the run's end so that `Daemon.wait` and the subscribers return at once. Runs finished
by another daemon process are heard of through Postgres NOTIFY (`scheduler.wakeup`) or the slow poll.
"""

from __future__ import annotations

import asyncio
from typing import Any

from pagemind.runtime.events import Event

END = object()  # put on a subscriber's queue when its run ends


class RunObserver:
    """The `TurnObserver` of one run: passes each event to the run's subscribers (implements the protocol)."""

    def __init__(self, fanout: "RunFanout", run_id: str):
        self.fanout, self.run_id = fanout, run_id

    @property
    def wants_deltas(self) -> bool:
        """The run's event stream is being read here: ask the model to stream, so the reply's pieces reach it."""
        return self.fanout.listening(self.run_id)

    def on_event(self, event: Event) -> None:
        """Hand the event to every subscriber of the run."""
        self.fanout.publish(self.run_id, event)


class RunFanout:
    """Subscribers and waiters per run id, in one process (one event loop)."""

    def __init__(self) -> None:
        self._queues: dict[str, list[asyncio.Queue[Any]]] = {}
        self._waiters: dict[str, list[asyncio.Event]] = {}

    def observer(self, run_id: str) -> RunObserver:
        """The observer to give the agent while it runs `run_id`."""
        return RunObserver(self, run_id)

    def subscribe(self, run_id: str) -> asyncio.Queue[Any]:
        """A queue that receives the run's events from now on, then `END`."""
        queue: asyncio.Queue[Any] = asyncio.Queue()
        self._queues.setdefault(run_id, []).append(queue)
        return queue

    def listening(self, run_id: str) -> bool:
        """Whether anyone subscribes to the run's events now."""
        return bool(self._queues.get(run_id))

    def unsubscribe(self, run_id: str, queue: asyncio.Queue[Any]) -> None:
        """Stop delivering to `queue`."""
        queues = self._queues.get(run_id, [])
        if queue in queues:
            queues.remove(queue)
        if not queues:
            self._queues.pop(run_id, None)

    def publish(self, run_id: str, event: Event) -> None:
        """Deliver one event to the run's subscribers (never blocks: the queues are unbounded)."""
        for queue in self._queues.get(run_id, ()):
            queue.put_nowait(event)

    def waiter(self, run_id: str) -> asyncio.Event:
        """An event set when the run is heard to end (register before reading the run's state: no end is missed)."""
        event = asyncio.Event()
        self._waiters.setdefault(run_id, []).append(event)
        return event

    def unwait(self, run_id: str, event: asyncio.Event) -> None:
        """Forget a waiter."""
        events = self._waiters.get(run_id, [])
        if event in events:
            events.remove(event)
        if not events:
            self._waiters.pop(run_id, None)

    def finish(self, run_id: str) -> None:
        """The run ended: end its subscribers' streams and wake its waiters."""
        for queue in self._queues.get(run_id, ()):
            queue.put_nowait(END)
        for event in self._waiters.get(run_id, ()):
            event.set()

    def finished_elsewhere(self, run_id: str) -> None:
        """Another process says it finished `run_id` (or some run, when empty): wake the waiters, who read the
        store to see; a named run's subscribers get `END`, the others notice at their next look."""
        for queue in self._queues.get(run_id, ()) if run_id else ():
            queue.put_nowait(END)
        targets = [run_id] if run_id else list(self._waiters)
        for target in targets:
            for event in self._waiters.get(target, ()):
                event.set()
