"""Transactions for the daemon's tables: one shape for SQLite and Postgres, and the Postgres wake-up channels.

A claim reads and then writes (the agent's oldest item, then its state). On SQLite a plain transaction begins
deferred and upgrades to a writer at the first write, which fails at once with "database is locked" when another
process wrote meanwhile; `BEGIN IMMEDIATE` takes the write lock up front (waiting up to the driver's busy
timeout), so claims from several processes queue instead of failing. On Postgres the transaction is an ordinary
one: the claim's rows are locked by `SELECT … FOR UPDATE SKIP LOCKED` (`scheduler.leases`).
"""

from __future__ import annotations

import contextlib
from typing import Iterator

from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine

INBOX_CHANNEL = "pagemind_inbox"  # NOTIFYed in the transaction that adds work (delivered at commit)
DONE_CHANNEL = "pagemind_done"  # NOTIFYed with the run id in the transaction that finishes an item


@contextlib.contextmanager
def write_transaction(engine: Engine) -> Iterator[Connection]:
    """A transaction that will write: `BEGIN IMMEDIATE` on SQLite, an ordinary one elsewhere; committed at the end
    of the block, rolled back on an exception."""
    with engine.connect() as conn:
        if engine.dialect.name == "sqlite":
            conn.exec_driver_sql("BEGIN IMMEDIATE")
        try:
            yield conn
        except BaseException:
            conn.rollback()
            raise
        conn.commit()


def notify(conn: Connection, channel: str, payload: str = "") -> None:
    """Wake the daemons listening on `channel` when this transaction commits (Postgres; a no-op elsewhere, where
    the only listeners are in this process and are woken directly)."""
    if conn.dialect.name == "postgresql":
        conn.execute(text("SELECT pg_notify(:channel, :payload)"), {"channel": channel, "payload": payload})
