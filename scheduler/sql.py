"""Transactions for the daemon's tables: one shape for SQLite and Postgres, on connections held open.

Every inbox and lease operation is a short transaction, run on the event loop's thread, hundreds per second. A
pooled connection per transaction costs a checkout, a liveness ping and a reset on return (three round trips
around one or two statements on Postgres), so the daemon keeps its connections: one for writes and one in
autocommit mode for reads, per thread (the event loop's, and any worker thread a web framework calls from). A
connection the server dropped is thrown away and replaced at the next use.

A claim reads and then writes. On SQLite a plain transaction begins deferred and upgrades to a writer at the first
write, which fails at once with "database is locked" when another process wrote meanwhile; `BEGIN IMMEDIATE` takes
the write lock up front (waiting up to the driver's busy timeout), so claims from several processes queue instead
of failing. On Postgres the transaction is an ordinary one, and the heads of the inbox are read with `SELECT …
FOR UPDATE SKIP LOCKED` (`scheduler.leases`).
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from typing import Any, Iterator

from sqlalchemy import func, text
from sqlalchemy.engine import Connection, Engine

INBOX_CHANNEL = "pagemind_inbox"  # NOTIFYed in the transaction that adds work (delivered at commit)
DONE_CHANNEL = "pagemind_done"  # NOTIFYed with the run id in the transaction that finishes an item
WATCH_CHANNEL = "pagemind_watch"  # NOTIFYed with "<run id> <daemon id>" when a daemon starts watching a run's events
EVENTS_CHANNEL = "pagemind_events"  # NOTIFYed with the run id in the statement that writes a run's relayed events

_held: "weakref.WeakKeyDictionary[Engine, HeldConnections]" = weakref.WeakKeyDictionary()
_held_guard = threading.Lock()


class HeldConnections:
    """A write connection and an autocommit read connection per thread, over one engine."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self.sqlite = engine.dialect.name == "sqlite"
        self._local = threading.local()

    @classmethod
    def of(cls, engine: Engine) -> "HeldConnections":
        """The held connections of `engine` (one set per engine in a process)."""
        with _held_guard:
            held = _held.get(engine)
            if held is None:
                held = _held[engine] = cls(engine)
            return held

    def _connection(self, kind: str) -> Connection:
        conn = getattr(self._local, kind, None)
        if conn is None or conn.closed or conn.invalidated:
            conn = self.engine.connect()
            if kind == "reader":
                conn = conn.execution_options(isolation_level="AUTOCOMMIT")
            setattr(self._local, kind, conn)
        return conn

    def _drop(self, kind: str) -> None:
        conn = getattr(self._local, kind, None)
        setattr(self._local, kind, None)
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.invalidate()
            with contextlib.suppress(Exception):
                conn.close()

    @contextlib.contextmanager
    def write(self) -> Iterator[Connection]:
        """A transaction that will write (`BEGIN IMMEDIATE` on SQLite), committed at the end of the block and
        rolled back on an exception."""
        conn = self._connection("writer")
        try:
            if self.sqlite:
                conn.exec_driver_sql("BEGIN IMMEDIATE")
            yield conn
            conn.commit()
        except BaseException:
            try:
                conn.rollback()
            except Exception:  # the connection is gone: a new one next time
                self._drop("writer")
            raise

    @contextlib.contextmanager
    def read(self) -> Iterator[Connection]:
        """A connection in autocommit mode, for reads (no BEGIN, no ROLLBACK around them)."""
        try:
            yield self._connection("reader")
        except Exception:
            self._drop("reader")
            raise

    @contextlib.contextmanager
    def statement(self) -> Iterator[Connection]:
        """A connection for one self-contained write statement: on Postgres the autocommit connection (the
        statement is its own transaction: no BEGIN and COMMIT round trips), on SQLite a `write` transaction."""
        if self.sqlite:
            with self.write() as conn:
                yield conn
        else:
            with self.read() as conn:
                yield conn

    def close(self) -> None:
        """Close this thread's connections."""
        self._drop("writer")
        self._drop("reader")


def write_transaction(engine: Engine):  # noqa: ANN201 (a context manager of a Connection)
    """`HeldConnections.of(engine).write()`."""
    return HeldConnections.of(engine).write()


def read_connection(engine: Engine):  # noqa: ANN201 (a context manager of a Connection)
    """`HeldConnections.of(engine).read()`."""
    return HeldConnections.of(engine).read()


def single_statement(engine: Engine):  # noqa: ANN201 (a context manager of a Connection)
    """`HeldConnections.of(engine).statement()`."""
    return HeldConnections.of(engine).statement()


def notifying(engine: Engine, channel: str, payload: Any) -> list[Any]:
    """Extra RETURNING columns that NOTIFY `channel` with `payload` (a value or a column) from inside the statement
    itself, when it commits (Postgres; nothing elsewhere)."""
    if engine.dialect.name != "postgresql":
        return []
    return [func.pg_notify(channel, payload).label("notified")]


def notify(conn: Connection, channel: str, payload: str = "") -> None:
    """Wake the daemons listening on `channel` when this transaction commits (Postgres; a no-op elsewhere, where
    the only listeners are in this process and are woken directly)."""
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_notify(:channel, :payload)"), {"channel": channel, "payload": payload})
