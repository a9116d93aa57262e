"""The connections `StateStore`'s reads and writes run on, beside the hot path's awaited statements on Postgres
(`state.async_pg`): an ORM session, or a connection for a block of single statements."""

from __future__ import annotations

from contextlib import AbstractContextManager as ContextManager

from sqlalchemy.engine import Connection, Engine
from sqlmodel import Session

from pagemind.runtime.state.dialects import dialect
from pagemind.runtime.state.held import read_connection


def orm_session(engine: Engine) -> Session:
    """A session on `engine` that keeps its rows loaded after a commit: rows are read back right after commit (ids),
    and expiring them would cost one SELECT per row."""
    return Session(engine, expire_on_commit=False)


def one_statement(engine: Engine) -> ContextManager[Connection]:
    """A connection in autocommit mode for a `with` block of work that is one statement (or reads that need no
    common snapshot), each its own transaction on Postgres, with no BEGIN and COMMIT/ROLLBACK round trips: the
    synchronous reads (a turn's hot statements are awaited there instead: `state.async_pg`). On Postgres the
    thread's held connection (`state.held`: no checkout, no switch to autocommit and back per block). SQLite sends
    no BEGIN for reads anyway, and switching its isolation level there and back would cost more than the reads
    (about 0.1 ms of CPU a turn): a pooled connection."""
    if not dialect(engine).held_reads:
        return engine.connect()
    return read_connection(engine)
