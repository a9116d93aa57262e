"""A run's live events and its end, for whoever waits in this process, and for watchers in other processes.

The daemon gives each run's agent an observer that hands every event (`runtime.events`) to the run's subscribers
(`Daemon.events`, through `scheduler.streams.run_stream`), numbered by `seq` (`scheduler.streams.relay.first_seq`),
and keeps the run's events so far, so that a subscriber that comes late gets them from the start. When a daemon in
another process watches the run, the events are also written to `run_events` for it (`scheduler.streams.relay`,
Postgres). What is kept leaves out the model requests' and responses' bodies, as the relay does: a subscriber there when
an event happens gets it whole, a late one as a watcher elsewhere would. The run's end wakes `Daemon.wait` and ends the
subscribers' streams. Runs finished by another daemon process are heard of through Postgres NOTIFY
(`scheduler.queue.wakeup`) or the slow poll; their events arrive as `MORE`, to be read.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import structlog

from pagemind.runtime.events import Event, without_body
from pagemind.runtime.state.records import utcnow
from pagemind.scheduler.streams.relay import END_LINE, RelayStore, first_seq, relayed_line

if TYPE_CHECKING:
    from pagemind.scheduler.queue.inbox_item import InboxItem

log = structlog.get_logger("pagemind.scheduler")
END = object()  # on a subscriber's queue: the run ended here, every event of it was delivered before
END_ELSEWHERE = object()  # another process says the run ended: read its relayed events a last time
STOPPED = object()  # on every queue when this daemon stopped: the stream ends now (its run pending or over)
MORE = object()  # relayed events of the run were written: read them


@dataclass
class Subscription:
    """A subscriber's queue: (seq, event) pairs of a run running here, `MORE`, `END` or `END_ELSEWHERE`."""

    queue: asyncio.Queue[Any] = field(default_factory=asyncio.Queue)
    more: bool = False  # a MORE is on the queue and not yet taken (one is enough)


class Waiter(asyncio.Event):
    """`RunFanout.waiter`: an event, and the finished item when the run ended in this process."""

    item: InboxItem | None = None


@dataclass
class _RunLog:
    """A run running in this process: its events so far, and how many of them are written for watchers."""

    run_id: str
    base: int  # the seq before its first event
    relay: bool  # someone in another process watches: write the events to `run_events`
    events: list[tuple[int, Event]] = field(default_factory=list)  # model bodies left out (`without_body`)
    written: int = 0
    handle: asyncio.TimerHandle | None = None  # the batch write scheduled
    last_write: float = float("-inf")


class RunObserver:
    """The `TurnObserver` of one run: passes each event to the run's subscribers (implements the protocol)."""

    def __init__(self, fanout: RunFanout, run_id: str):
        self.fanout, self.run_id = fanout, run_id

    @property
    def wants_deltas(self) -> bool:
        """The run's events are read (here, or elsewhere through the relay): ask the model to stream, so the
        reply's pieces reach the readers."""
        return self.fanout.listening(self.run_id)

    def on_event(self, event: Event) -> None:
        """Hand the event to every subscriber of the run."""
        self.fanout.publish(self.run_id, event)


class RunFanout:
    """Subscribers, waiters and running runs' events, in one process (one event loop). `owner` is this daemon's id;
    `relay` is None where events are not relayed (SQLite); `interval_s` spaces a run's relay writes."""

    def __init__(
        self,
        owner: str = "",
        relay: RelayStore | None = None,
        *,
        interval_s: float = 0.05,
        clock: Callable[[], datetime] = utcnow,
    ):
        self.owner, self.relay, self.interval_s, self.clock = owner, relay, interval_s, clock
        self._subs: dict[str, list[Subscription]] = {}
        self._waiters: dict[str, list[Waiter]] = {}
        self._runs: dict[str, _RunLog] = {}

    # -- the runs this process runs -------------------------------------------------------------------------------

    def begin(self, run_id: str, attempt: int = 0, watcher: str | None = None) -> None:
        """The item `run_id` was claimed (its `attempt`-th claim; `watcher` as its row says): number its events
        and keep them; relay them when the watcher is another daemon. Call it in the claim's synchronous stretch,
        so that no watch notice comes in between unheard."""
        relay = self.relay is not None and watcher is not None and watcher != self.owner
        self._runs[run_id] = _RunLog(run_id, first_seq(attempt), relay)

    def observer(self, run_id: str) -> RunObserver:
        """The observer to give the agent while it runs `run_id` (begun with `begin`)."""
        return RunObserver(self, run_id)

    def running_here(self, run_id: str) -> bool:
        """Whether this process runs `run_id` now."""
        return run_id in self._runs

    def relayed(self, run_id: str) -> bool:
        """Whether the run's events are written for a watcher in another process now (`settle` writes the rest of
        them, and its end row, before its item is marked finished)."""
        run = self._runs.get(run_id)
        return run is not None and run.relay

    def listening(self, run_id: str) -> bool:
        """Whether anyone reads the run's events now: a subscriber here, or a watcher elsewhere it is relayed to."""
        run = self._runs.get(run_id)
        return bool(self._subs.get(run_id)) or (run is not None and run.relay)

    def publish(self, run_id: str, event: Event) -> None:
        """Deliver one event to the run's subscribers (never blocks: the queues are unbounded); keep it for late
        subscribers and watchers elsewhere without a model request's or response's body (a step's whole prompt,
        held until the run ends otherwise; no stream shows it), and schedule its write when the run is relayed."""
        run = self._runs.get(run_id)
        if run is None:
            return
        seq = run.base + len(run.events) + 1
        run.events.append((seq, without_body(event)))
        for sub in self._subs.get(run_id, ()):
            sub.queue.put_nowait((seq, event))
        if run.relay and run.handle is None:
            self._schedule(run)

    def _schedule(self, run: _RunLog) -> None:
        loop = asyncio.get_running_loop()
        run.handle = loop.call_later(max(0.0, run.last_write + self.interval_s - loop.time()), self._write, run)

    def _write(self, run: _RunLog, last: bool = False) -> None:
        """Write the run's events not yet written (one statement), and the end row when `last`. A failure is logged
        and the events stay pending for the next write: a relay never fails a turn."""
        run.handle = None
        if self.relay is None or (run.written == len(run.events) and not last):
            return
        try:
            batch = [(seq, relayed_line(event)) for seq, event in run.events[run.written :]]
            if last:
                batch.append((run.base + len(run.events) + 1, END_LINE))
            self.relay.write(run.run_id, batch, self.clock())
        except Exception as exc:
            log.warning(
                "relay_write_failed", run_id=run.run_id, events=len(run.events) - run.written, error=str(exc)[:200]
            )
            return
        run.written = len(run.events)
        run.last_write = asyncio.get_running_loop().time()

    def settle(self, run_id: str, last: bool = False) -> None:
        """Write what is left of a relayed run's events now; `last`: with the end row (before its item is marked
        finished, so a watcher that hears the end finds every event)."""
        run = self._runs.get(run_id)
        if run is not None and run.relay:
            if run.handle is not None:
                run.handle.cancel()
            self._write(run, last)

    def forget(self, run_id: str) -> None:
        """This process stopped running `run_id` (finished, or given back): write what is left, drop its events."""
        self.settle(run_id)
        self._runs.pop(run_id, None)

    def watched(self, payload: str) -> None:
        """A `pagemind_watch` notice ("<run id> <daemon id>"): if this process runs that run and the watcher is
        another daemon, relay the run's events, from the first."""
        run_id, _, who = payload.partition(" ")
        run = self._runs.get(run_id)
        if run is not None and who and who != self.owner and not run.relay and self.relay is not None:
            run.relay = True
            log.info("relay_started", run_id=run_id, watcher=who, events=len(run.events))
            if run.handle is None:
                self._schedule(run)

    def recheck(self, watchers: Callable[[list[str]], dict[str, str]]) -> None:
        """In case a watch's notice was missed (the LISTEN connection came back; and from the heartbeat): look up
        the watchers of the runs running here unrelayed (`watchers`: run ids → their watcher), and relay where due.
        (A subscriber that missed a notice of relayed events reads them at its next poll.)"""
        quiet = [run_id for run_id, run in self._runs.items() if not run.relay]
        if quiet and self.relay is not None:
            for run_id, who in watchers(quiet).items():
                self.watched(f"{run_id} {who}")

    # -- subscribers and waiters ----------------------------------------------------------------------------------

    def subscribe(self, run_id: str, after: int = 0) -> Subscription:
        """A queue that receives the run's events after seq `after` — those so far when this process runs it —
        then `END`; `MORE` and `END_ELSEWHERE` when another process runs it."""
        sub = Subscription()
        run = self._runs.get(run_id)
        for seq, event in run.events if run is not None else ():
            if seq > after:
                sub.queue.put_nowait((seq, event))
        self._subs.setdefault(run_id, []).append(sub)
        return sub

    def unsubscribe(self, run_id: str, sub: Subscription) -> None:
        """Stop delivering to `sub`."""
        subs = self._subs.get(run_id, [])
        if sub in subs:
            subs.remove(sub)
        if not subs:
            self._subs.pop(run_id, None)

    def heard_events(self, run_id: str) -> None:
        """A `pagemind_events` notice: relayed events of `run_id` were written; its subscribers read them (not
        when this process runs it: they have them already)."""
        if run_id in self._runs:
            return
        for sub in self._subs.get(run_id, ()):
            if not sub.more:
                sub.more = True
                sub.queue.put_nowait(MORE)

    def waiter(self, run_id: str) -> Waiter:
        """An event set when the run is heard to end (register before reading the run's state: no end is missed);
        its `item` is the finished item when the run ended in this process."""
        event = Waiter()
        self._waiters.setdefault(run_id, []).append(event)
        return event

    def unwait(self, run_id: str, event: asyncio.Event) -> None:
        """Forget a waiter."""
        events = self._waiters.get(run_id, [])
        if event in events:
            events.remove(event)
        if not events:
            self._waiters.pop(run_id, None)

    def finish(self, run_id: str, watcher: str | None = None, item: InboxItem | None = None) -> None:
        """The run ended here (its row, as the finish returned it, names `watcher`): end its subscribers' streams
        and wake its waiters, handing them `item` (the finished item as stored: they need not read it again); the
        dispatcher then `forget`s its events. A watcher in another process whose notice was not heard yet (it came
        while the run ended) gets every event and the end row now."""
        run = self._runs.get(run_id)
        if run is not None and not run.relay and watcher is not None and watcher != self.owner and self.relay:
            run.relay = True
            log.info("relay_late", run_id=run_id, watcher=watcher, events=len(run.events))
            self._write(run, last=True)
        for sub in self._subs.get(run_id, ()):
            sub.queue.put_nowait(END)
        for event in self._waiters.get(run_id, ()):
            event.item = item
            event.set()

    def finished_elsewhere(self, run_id: str) -> None:
        """Another process says it finished `run_id` (or some run, when empty): wake the waiters, who read the
        store to see; a named run's subscribers get `END_ELSEWHERE`, the others notice at their next look. A run
        this process runs is left alone: its `finish` here wakes them with the item (the notice of its own finish
        statement can come before that statement's answer, now that the statement is awaited)."""
        if run_id in self._runs:
            return
        for sub in self._subs.get(run_id, ()) if run_id else ():
            sub.queue.put_nowait(END_ELSEWHERE)
        targets = [run_id] if run_id else list(self._waiters)
        for target in targets:
            for event in self._waiters.get(target, ()):
                event.set()

    def end_all(self) -> None:
        """The daemon stopped: every stream ends (`STOPPED`) and every waiter looks again (a daemon that stopped
        answers them without reading: `Daemon.wait`)."""
        for subs in self._subs.values():
            for sub in subs:
                sub.queue.put_nowait(STOPPED)
        for events in self._waiters.values():
            for event in events:
                event.set()

    def prune(self, before: datetime) -> None:
        """Delete relayed events written before `before` (from the heartbeat; any daemon may)."""
        if self.relay is not None:
            try:
                self.relay.prune(before)
            except Exception as exc:
                log.warning("relay_prune_failed", error=str(exc)[:200])
