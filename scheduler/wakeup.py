"""Waking daemons in other processes: Postgres LISTEN/NOTIFY.

A submission NOTIFYs `pagemind_inbox` and a finished item `pagemind_done` (with its run id) in the transaction
that writes it, so the notice arrives exactly when the row is visible. Each daemon on Postgres keeps one
connection LISTENing on both and turns a notice into an in-process wake-up. A lost connection is reconnected with
a backoff; meanwhile the dispatcher's slow poll (`DaemonConfig.poll_s`) is the safety net, and every reconnect
wakes the dispatcher once to catch up what it missed. SQLite has no notices: one process's submissions wake its
own dispatcher directly, and other processes find work by the poll.
"""

from __future__ import annotations

import asyncio
from typing import Callable

import structlog
from sqlalchemy.engine import Engine

from pagemind.scheduler.sql import DONE_CHANNEL, INBOX_CHANNEL

log = structlog.get_logger("pagemind.scheduler")


class PgWakeups:
    """One LISTEN connection: `on_inbox(source)` when work arrives (from the daemon `source`, or "" when unknown),
    `on_done(run_id)` when an item finishes."""

    def __init__(self, engine: Engine, on_inbox: Callable[[str], None], on_done: Callable[[str], None]):
        self.conninfo = engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
        self.on_inbox, self.on_done = on_inbox, on_done
        self.listening = asyncio.Event()  # set while the connection listens (tests wait for it)

    async def run(self) -> None:
        """Listen until cancelled, reconnecting after a failure."""
        import psycopg

        pause = 0.1
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(self.conninfo, autocommit=True) as conn:
                    await conn.execute(f"LISTEN {INBOX_CHANNEL}")
                    await conn.execute(f"LISTEN {DONE_CHANNEL}")
                    self.listening.set()
                    pause = 0.1
                    self.on_inbox("")  # anything that arrived while not listening
                    async for notice in conn.notifies():
                        if notice.channel == INBOX_CHANNEL:
                            self.on_inbox(notice.payload)
                        else:
                            self.on_done(notice.payload)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the server went away: reconnect; the poll covers the gap
                self.listening.clear()
                log.warning("listen_lost", error=str(exc)[:200], retry_in=pause)
                await asyncio.sleep(pause)
                pause = min(pause * 2, 5.0)
