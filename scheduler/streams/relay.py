"""Relaying a run's events to daemon processes other than the one running it (Postgres; reads and writes
`run_events`, the only code that does).

A client may stream a run from daemon X while daemon Y runs it. The protocol:

1. X watches the run: `Inbox.watch` sets the item's `watcher` and NOTIFYs `pagemind_watch` "<run id> <X>", in one
   statement. Y learns of the watch from the notice, or, when the watch came before the run started, from the
   `watcher` column its claim returns (`Inbox.claim_next` returns the whole row: no extra query).
2. Y keeps each running run's events in memory (`scheduler.streams.fanout`); once someone else watches, it writes them
   all so far, then each new batch, to `run_events` — one statement per batch that also NOTIFYs
   `pagemind_events` with the run id, so the notice arrives exactly when the rows are visible. Batches are at most
   one per `interval_s` per run (a model that streams tokens would otherwise cost one statement per token).
   Before the item is marked finished Y writes what is left and an end row (`END_LINE`), so a watcher that
   hears the end (`pagemind_done`) and reads once more has every event.
3. X reads the rows after the last `seq` it has (`RunStream`), on each notice, at the end, and on its slow poll,
   until it has read the end row.

A watch may come while the run ends, its notice still unread by Y when Y finishes the item. The watch and the
finish update the same inbox row, so they are ordered by its lock: a watch that saw the item unfinished is seen by
the finish, whose returned row names the watcher; Y then writes every event and the end row right after the
finish. X, having heard the end but read no end row, waits for them (at most `RunStream`'s grace, in case Y died
in between).

`seq` orders a run's events: the item's attempt in the high 32 bits, the event's index in the attempt below, so
the events of a run taken over after a crash follow those of the attempt that died, and a reader's "after seq"
never sees an event twice. Nothing is written for a run nobody in another process watches: the single-daemon
path costs one `UPDATE … RETURNING` per stream (the watch), nothing per step. Rows older than `events_keep_s`
are deleted by every daemon's heartbeat.

What is relayed is the events' trace lines (`runtime.events`, validated back by one `TypeAdapter`), so a new kind
of event travels unchanged; the bodies of model requests and responses are left out (`{}`): they are the trace's
business, several kilobytes a step (the whole prompt), and no stream shows them.
"""

from __future__ import annotations

from datetime import datetime

import structlog
from pydantic import ValidationError
from sqlalchemy import bindparam, delete, select, text
from sqlalchemy.engine import Engine

from pagemind.runtime.crypto.columns import cipher_of, seal_text
from pagemind.runtime.events import Event, without_body
from pagemind.runtime.state.dialects import dialect
from pagemind.runtime.state.held import read_connection, single_statement
from pagemind.runtime.state.tables.daemon import run_events
from pagemind.runtime.trace.format import LINE_ADAPTER, Header, dump_line
from pagemind.scheduler.queue.sql import EVENTS_CHANNEL

log = structlog.get_logger("pagemind.scheduler")
ATTEMPT_SHIFT = 32
END_LINE = "end"  # the `event` of a run's last row: every event of the run is written (not JSON: never an event)

# One statement writes a batch and NOTIFYs: a data-modifying WITH runs to completion whether or not the query
# reads it, and the notice is sent when the statement's transaction commits.
_WRITE = text(
    "WITH written AS (INSERT INTO run_events (run_id, seq, at, event) "
    "SELECT :run_id, s, :at, e FROM unnest(CAST(:seqs AS bigint[]), CAST(:events AS text[])) AS u(s, e)) "
    "SELECT pg_notify(:channel, :run_id)"
)
_READ = (
    select(run_events.c.seq, run_events.c.event)
    .where(run_events.c.run_id == bindparam("p_run_id"), run_events.c.seq > bindparam("p_after"))
    .order_by(run_events.c.seq)
)
_PRUNE = delete(run_events).where(run_events.c.at < bindparam("p_before"))


def first_seq(attempt: int) -> int:
    """The seq before the first event of the item's `attempt` (its events are numbered after it)."""
    return attempt << ATTEMPT_SHIFT


def attempt_of(seq: int) -> int:
    """The attempt whose event `seq` is (0 for the seq before any event)."""
    return seq >> ATTEMPT_SHIFT


def relayed_line(event: Event) -> str:
    """The JSON relayed for one event: its trace line, without a model request's or response's body."""
    return dump_line(without_body(event)).decode()


class RelayStore:
    """Writes and reads relayed events (Postgres only: `supported` says whether this engine relays)."""

    def __init__(self, engine: Engine):
        self.engine = engine

    @staticmethod
    def supported(engine: Engine) -> bool:
        """Whether events are relayed on this database: on Postgres. SQLite has no notices, and its deployment is
        one daemon per database file (several processes on one file share the work, and learn only of a run's
        end, by their poll)."""
        return dialect(engine).notices

    def write(self, run_id: str, batch: list[tuple[int, str]], now: datetime) -> None:
        """Write a batch of (seq, JSON) and notify watchers, in one statement, committed on return."""
        cipher = cipher_of(self.engine)
        with single_statement(self.engine) as conn:
            conn.execute(
                _WRITE,
                {
                    "run_id": run_id,
                    "at": now,
                    "seqs": [seq for seq, _ in batch],
                    # Raw SQL: sealed here, as the column's type would (encryption at rest, `runtime.crypto`).
                    "events": [seal_text(line, cipher) for _, line in batch],
                    "channel": EVENTS_CHANNEL,
                },
            )

    def read(self, run_id: str, after: int) -> tuple[list[tuple[int, Event]], int, bool]:
        """The run's relayed events after `after`, in order; the last seq read; whether the end row was read. An
        event this version cannot read (a kind a newer daemon added) is left out, with a warning."""
        with read_connection(self.engine) as conn:
            rows = conn.execute(_READ, {"p_run_id": run_id, "p_after": after}).all()
        events, ended = [], False
        for seq, line in rows:
            if line == END_LINE:
                ended = True
                continue
            try:
                event = LINE_ADAPTER.validate_json(line)  # the trace's line format: an event, never a header here
                if isinstance(event, Header):
                    raise ValueError("a trace header, not an event")
                events.append((seq, event))
            except (ValidationError, ValueError) as exc:
                log.warning("relayed_event_unreadable", run_id=run_id, seq=seq, error=str(exc)[:200])
        return events, rows[-1][0] if rows else after, ended

    def prune(self, before: datetime) -> int:
        """Delete the events written before `before`; returns how many."""
        with single_statement(self.engine) as conn:
            return conn.execute(_PRUNE, {"p_before": before}).rowcount
