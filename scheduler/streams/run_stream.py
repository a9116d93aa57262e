"""One subscriber's view of a run's events (`Daemon.events`): from wherever the run runs, in order, once each.

The events of a run this process runs come from its fanout (`scheduler.streams.fanout`), those so far first. On
Postgres the stream also watches the run (`Inbox.watch`), so that a daemon in another process that runs it
relays its events (`scheduler.streams.relay`), and reads them from `run_events` when told there are more, when told the
run ended, and at each slow poll (a missed notice costs at most `poll_s`), until it reads the run's end row.
Both sources number events by `seq`; the stream passes on only events after the last it passed, so an event that
reaches it twice is passed once.

A run this process took over (another daemon's attempt died or was stopped) has its earlier attempts' events only
in `run_events`, as far as they were relayed (someone outside that daemon watched, this process's own stream
included). When the first event of a later attempt than any the stream has passed comes through the fanout, the
stream first reads the earlier attempts' rows, so a subscriber, early or late, gets them before the new attempt's
(what a crashed attempt had not written yet is lost with it).
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

import structlog

from pagemind.runtime.events import Event
from pagemind.scheduler.queue.inbox import Inbox
from pagemind.scheduler.queue.inbox_item import TERMINAL
from pagemind.scheduler.streams.fanout import END, END_ELSEWHERE, MORE, STOPPED, RunFanout
from pagemind.scheduler.streams.relay import attempt_of, first_seq

log = structlog.get_logger("pagemind.scheduler")
LATE_GRACE_S = 10.0  # after a run ended elsewhere, how long to wait for its end row (its daemon may have died)


class RunStream:
    """The async iterator `Daemon.events` returns: subscribed (and watching) at creation, ends with the run.
    `last_seq` is the seq of the last event passed on (a client's `Last-Event-ID`: `Daemon.events(run_id,
    after=last_seq)` continues from there)."""

    def __init__(self, fanout: RunFanout, inbox: Inbox, run_id: str, *, owner: str, poll_s: float, after: int = 0):
        self.fanout, self.inbox, self.run_id, self.poll_s, self.owner = fanout, inbox, run_id, poll_s, owner
        self.relay = fanout.relay
        self.sub = self.fanout.subscribe(run_id, after)
        self.cursor = self.last_seq = after
        self.ready: deque[tuple[int, Event]] = deque()
        self.closed = False
        self.watching = False  # the watch saw the run unfinished: its daemon writes an end row when it ends
        self.ended_at: float | None = None  # when the run was heard to end (loop time)
        self.complete = False  # every event of the run is in `ready` or passed on
        if self.relay is not None:
            try:
                state = inbox.watch(run_id, owner)
            except Exception as exc:  # the store failed: the stream still gets the run's end, by the poll
                log.warning("watch_failed", run_id=run_id, error=str(exc)[:200])
            else:
                self.watching = state is not None and state not in TERMINAL
                if not self.watching:  # over (or unknown): what was relayed, then the end
                    self._ended()

    def __aiter__(self) -> RunStream:
        return self

    async def __anext__(self) -> Event:
        loop = asyncio.get_running_loop()
        while True:
            if self.ready:
                self.last_seq, event = self.ready.popleft()
                return event
            if self.closed:
                raise StopAsyncIteration
            wait = self.poll_s
            if self.ended_at is not None:
                while not self.sub.queue.empty():
                    self._take(self.sub.queue.get_nowait())
                if self.ready:
                    continue
                wait = min(wait, self.ended_at + LATE_GRACE_S - loop.time())
                if self.complete or wait <= 0:
                    self._close()
                    continue
            try:
                message = await asyncio.wait_for(self.sub.queue.get(), wait)
            except TimeoutError:
                self._poll()
                continue
            self._take(message)

    def _take(self, message: Any) -> None:
        if message is MORE:
            self.sub.more = False
            self._pull()
        elif message is END:  # this process ran it: every event came through the fanout
            self.complete = True
            self._ended()
        elif message is END_ELSEWHERE:
            self._ended()
        elif message is STOPPED:  # the daemon stopped: its connections are closed, nothing more comes
            self._close()
        else:
            pair: tuple[int, Event] = message  # not a marker: a (seq, event) pair (`RunFanout`)
            seq, event = pair
            if attempt_of(seq) > max(attempt_of(self.cursor), 1):  # taken over here: earlier attempts first
                self._pull(upto=first_seq(attempt_of(seq)))
            self._add(seq, event)

    def _ended(self) -> None:
        """The run is over: read what was relayed; done unless its daemon still owes the end row."""
        if self.ended_at is None:
            self.ended_at = asyncio.get_running_loop().time()
        self._pull()
        if not self.watching or self.relay is None:
            self.complete = True

    def _add(self, seq: int, event: Event) -> None:
        if seq > self.cursor:
            self.cursor = seq
            self.ready.append((seq, event))

    def _pull(self, upto: int | None = None) -> None:
        """Read the run's relayed events after the cursor; only those up to seq `upto` when given (the attempts
        before this process's), none otherwise when this process runs the run (it delivers them)."""
        if self.relay is None or self.complete or (upto is None and self.fanout.running_here(self.run_id)):
            return
        try:
            events, last, ended = self.relay.read(self.run_id, self.cursor)
        except Exception as exc:  # the next notice or poll reads again from the same cursor
            log.warning("relay_read_failed", run_id=self.run_id, error=str(exc)[:200])
            return
        for seq, event in events:
            if upto is None or seq <= upto:
                self._add(seq, event)
        if upto is None:
            self.cursor = max(self.cursor, last)
            self.complete = self.complete or ended

    def _poll(self) -> None:
        """Nothing came for a while: look whether the run ended, and read what a lost notice would have announced
        (after the look: what was written before the end is then visible)."""
        if self.ended_at is not None:
            self._pull()
            return
        item = self.inbox.get(self.run_id)
        if item is None or item.finished:
            self._ended()
        elif item.state == "running" and item.owner != self.owner:  # not while pending: nothing to read yet
            self._pull()

    async def aclose(self) -> None:
        """Stop listening (a stream's client went away before the run ended)."""
        self._close()

    def _close(self) -> None:
        if not self.closed:
            self.closed = True
            self.fanout.unsubscribe(self.run_id, self.sub)
