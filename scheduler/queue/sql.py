"""The daemon's SQL plumbing: its NOTIFY channels, and its transactions on connections held open.

Every inbox and lease operation is a short transaction, hundreds per second. Those of every turn (submit, claim,
finish, an arrival's lease-and-claim) are single statements, awaited on Postgres (`runtime.state.async_pg`: the
event loop runs other turns while one waits for the server); the rest run on the event loop's thread, on the
connections `runtime.state.held` keeps per thread (one for writes, one in autocommit mode for reads and
single-statement writes). A claim reads and then writes: on SQLite its transaction is `BEGIN IMMEDIATE`, so claims
from several processes queue instead of failing; on Postgres the heads of the inbox are read with `SELECT … FOR
UPDATE SKIP LOCKED` (`scheduler.queue.leases`).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine import Connection, Engine

from pagemind.runtime.state.dialects import dialect

INBOX_CHANNEL = "pagemind_inbox"  # NOTIFYed in the transaction that adds work (delivered at commit)
DONE_CHANNEL = "pagemind_done"  # NOTIFYed with the run id in the transaction that finishes an item
WATCH_CHANNEL = "pagemind_watch"  # NOTIFYed with "<run id> <daemon id>" when a daemon starts watching a run's events
EVENTS_CHANNEL = "pagemind_events"  # NOTIFYed with the run id in the statement that writes a run's relayed events


def notifying(engine: Engine, channel: str, payload: Any) -> list[Any]:
    """Extra RETURNING columns that NOTIFY `channel` with `payload` (a value or a column) from inside the statement
    itself, when it commits (Postgres; nothing elsewhere)."""
    return dialect(engine).notifying(channel, payload)


def notify(conn: Connection, channel: str, payload: str = "") -> None:
    """Wake the daemons listening on `channel` when this transaction commits (Postgres; a no-op elsewhere, where
    the only listeners are in this process and are woken directly)."""
    dialect(conn).notify(conn, channel, payload)
