"""Writes that leave no byte of the old text on disk, for a purge, a forget and a rejected review.

SQLite: `PRAGMA secure_delete` around the transaction (the pages it frees are overwritten with zeros), then the
WAL checkpointed into the database and truncated (its frames still held the old rows). Measured with a canary
(tests/runtime/erasure): without secure_delete the database file keeps it, without the checkpoint the WAL and the
database do, with both neither does, and VACUUM adds nothing. Postgres keeps dead row versions until VACUUM: the
docs' operations page says how to run it; nothing here does anything there.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

from sqlalchemy.engine import Connection, Engine

from pagemind.runtime.state.dialects import dialect

T = TypeVar("T")


def in_secure_transaction(engine: Engine, work: Callable[[Connection], T]) -> T:
    """Run `work` in one transaction with the space it frees zeroed (SQLite's `secure_delete`)."""
    sqlite = dialect(engine).keeps_deleted_pages
    with engine.connect() as conn:
        raw = conn.connection.dbapi_connection
        if sqlite and raw is not None:  # (a PRAGMA through SQLAlchemy would begin its transaction)
            raw.execute("PRAGMA secure_delete=ON")
        try:
            with conn.begin():
                return work(conn)
        finally:
            if sqlite and raw is not None:
                raw.execute("PRAGMA secure_delete=OFF")


def truncate_log(engine: Engine, tries: int = 1) -> bool:
    """SQLite: the WAL checkpointed into the database and truncated, tried up to `tries` times (a reader in another
    connection can keep it from finishing; its transaction is short); False when it never finished. Postgres:
    nothing to do (True)."""
    if not dialect(engine).keeps_deleted_pages:
        return True
    for attempt in range(tries):
        with engine.connect() as conn:
            raw = conn.connection.dbapi_connection
            assert raw is not None  # a checked-out connection has its driver connection
            busy = raw.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        if not busy or not busy[0]:
            return True
        if attempt + 1 < tries:
            time.sleep(0.05 * (attempt + 1))
    return False


def securely(engine: Engine, work: Callable[[Connection], T]) -> T:
    """`work` in a secure transaction, then the WAL truncated (once: a busy checkpoint is left to the next one)."""
    result = in_secure_transaction(engine, work)
    truncate_log(engine)
    return result
