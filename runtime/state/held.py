"""Connections held open per thread and engine: a write connection and an autocommit read connection.

A pooled connection per statement costs a checkout, a reset on return and, for a one-statement transaction on
Postgres, switching the connection to autocommit and back: on the daemon's hot path (hundreds of statements a
second, each its own transaction) that was ~5-8 % of its CPU. So the connections are kept: one for writes and one
in autocommit mode for reads and single-statement writes, per thread (the event loop's, and any worker thread).
A connection the server dropped is thrown away and replaced at the next use. Nothing awaits while it is in use:
every statement runs to its end on the thread that holds it. (On Postgres the statements of a turn and of the
inbox that are each their own transaction are awaited instead, on async connections: `state.async_pg`.)

On SQLite `write` begins with `BEGIN IMMEDIATE`: a plain transaction begins deferred and upgrades to a writer at
the first write, which fails at once with "database is locked" when another process wrote meanwhile; taking the
write lock up front (waiting up to the driver's busy timeout) makes writers from several processes queue instead.
"""

from __future__ import annotations

import contextlib
import threading
import weakref
from collections.abc import Callable, Iterator
from typing import TypeVar

from sqlalchemy import event
from sqlalchemy.engine import Connection, Engine

from pagemind.runtime.state.dialects import dialect

# An engine's held connections hang off the engine itself, not off a dictionary keyed by it: each connection
# refers to its engine, so a dictionary's value would keep its own key alive and no engine (with its connections,
# and an in-memory SQLite database's data) would ever be freed. As an attribute they form a cycle with the engine,
# which the collector frees with it.
_ATTRIBUTE = "_pagemind_held_connections"
_held_guard = threading.Lock()


class HeldConnections:
    """A write connection and an autocommit read connection per thread, over one engine."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self.dialect = dialect(engine)
        # Per thread, in a table the collector sees, not a `threading.local`: a live thread's locals are a root,
        # so the main thread's connections would keep the engine alive for ever. A thread's entry goes with it.
        self._by_thread: weakref.WeakKeyDictionary[threading.Thread, dict[str, Connection]] = (
            weakref.WeakKeyDictionary()
        )
        event.listen(engine, "engine_disposed", self._close_every)

    @classmethod
    def of(cls, engine: Engine) -> HeldConnections:
        """The held connections of `engine` (one set per engine in a process)."""
        return hung_off(engine, _ATTRIBUTE, cls)

    def _mine(self) -> dict[str, Connection]:
        thread = threading.current_thread()
        mine = self._by_thread.get(thread)
        if mine is None:
            with _held_guard:
                mine = self._by_thread.setdefault(thread, {})
        return mine

    def _connection(self, kind: str) -> Connection:
        mine = self._mine()
        conn = mine.get(kind)
        if conn is None or conn.closed or conn.invalidated:
            conn = self.engine.connect()
            if kind == "reader":
                conn = conn.execution_options(isolation_level="AUTOCOMMIT")
            mine[kind] = conn
        return conn

    def _close_every(self, _engine: Engine) -> None:
        """On `engine.dispose()`: close every thread's held connections. A disposed pool closes only the idle
        connections; a checked-out one goes back to it when closed and stays open until the collector frees the
        pool, so these are invalidated (their database sessions end now). A thread's next statement opens new
        ones."""
        with _held_guard:
            every = [conn for mine in self._by_thread.values() for conn in mine.values()]
        for conn in every:
            _close(conn)

    def _drop(self, kind: str) -> None:
        conn = self._mine().pop(kind, None)
        if conn is not None:
            _close(conn)

    @contextlib.contextmanager
    def write(self) -> Iterator[Connection]:
        """A transaction that will write (`BEGIN IMMEDIATE` on SQLite), committed at the end of the block and
        rolled back on an exception."""
        conn = self._connection("writer")
        try:
            if self.dialect.write_begin is not None:
                conn.exec_driver_sql(self.dialect.write_begin)
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
        if self.dialect.autocommit_statements:
            with self.read() as conn:
                yield conn
        else:
            with self.write() as conn:
                yield conn

    def close(self) -> None:
        """Close this thread's connections."""
        self._drop("writer")
        self._drop("reader")


T = TypeVar("T")


def hung_off(engine: Engine, attribute: str, make: Callable[[Engine], T]) -> T:
    """The engine's one `make(engine)`, kept as its `attribute` and made at the first call (under a lock): hung off
    the engine rather than kept in a table keyed by it, which would keep the engine alive (see above)."""
    found = getattr(engine, attribute, None)
    if found is None:
        with _held_guard:
            found = getattr(engine, attribute, None)
            if found is None:
                found = make(engine)
                setattr(engine, attribute, found)
    return found


def _close(conn: Connection) -> None:
    """End `conn`'s database session now, whatever state it is in."""
    with contextlib.suppress(Exception):
        conn.invalidate()
    with contextlib.suppress(Exception):
        conn.close()


def write_transaction(engine: Engine) -> contextlib.AbstractContextManager[Connection]:
    """`HeldConnections.of(engine).write()`."""
    return HeldConnections.of(engine).write()


def read_connection(engine: Engine) -> contextlib.AbstractContextManager[Connection]:
    """`HeldConnections.of(engine).read()`."""
    return HeldConnections.of(engine).read()


def single_statement(engine: Engine) -> contextlib.AbstractContextManager[Connection]:
    """`HeldConnections.of(engine).statement()`."""
    return HeldConnections.of(engine).statement()
