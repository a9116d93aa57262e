"""Rewrites that leave no byte of the old text on disk: SQLite's `secure_delete` around them and its WAL truncated
after (the same two measures as `runtime.erasure.rows`, which a purge uses; Postgres keeps dead tuples until
VACUUM: the operations page says how to run it)."""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from sqlalchemy.engine import Connection, Engine

from pagemind.runtime.state.dialects import dialect

T = TypeVar("T")


def securely(engine: Engine, work: Callable[[Connection], T]) -> T:
    """Run `work` in one transaction with freed space zeroed (SQLite's `secure_delete`), then truncate the WAL."""
    sqlite = dialect(engine).keeps_deleted_pages
    with engine.connect() as conn:
        raw = conn.connection.dbapi_connection
        if sqlite and raw is not None:  # (a PRAGMA through SQLAlchemy would begin its transaction)
            raw.execute("PRAGMA secure_delete=ON")
        try:
            with conn.begin():
                result = work(conn)
        finally:
            if sqlite and raw is not None:
                raw.execute("PRAGMA secure_delete=OFF")
    checkpoint(engine)
    return result


def checkpoint(engine: Engine) -> bool:
    """SQLite: the WAL checkpointed into the database and truncated (False when a reader kept it from finishing);
    Postgres: nothing to do (True)."""
    if not dialect(engine).keeps_deleted_pages:
        return True
    with engine.connect() as conn:
        raw = conn.connection.dbapi_connection
        assert raw is not None  # a checked-out connection has its driver connection
        busy = raw.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
    return not busy or not busy[0]
