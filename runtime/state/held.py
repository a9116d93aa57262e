"""Connections held open per thread and engine: a write connection and an autocommit read connection.

A pooled connection per statement costs a checkout, a reset on return and, for a one-statement transaction on
Postgres, switching the connection to autocommit and back: on the daemon's hot path (hundreds of statements a
second, each its own transaction) that was ~5-8 % of its CPU. So the connections are kept: one for writes and one
in autocommit mode for reads and single-statement writes, per thread (the event loop's, and any worker thread).
A connection the server dropped is thrown away and replaced at the next use. Nothing awaits while it is in use:
every statement runs to its end on the thread that holds it.

On SQLite `write` begins with `BEGIN IMMEDIATE`: a plain transaction begins deferred and upgrades to a writer at
the first write, which fails at once with "database is locked" when another process wrote meanwhile; taking the
write lock up front (waiting up to the driver's busy timeout) makes writers from several processes queue instead.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from typing import Iterator

from sqlalchemy.engine import Connection, Engine

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
