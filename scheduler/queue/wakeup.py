"""Waking daemons in other processes: Postgres LISTEN/NOTIFY.

A submission NOTIFYs `pagemind_inbox` and a finished item `pagemind_done` (with its run id) in the transaction
that writes it, so the notice arrives exactly when the row is visible; so do a watch of a run's events
(`pagemind_watch`) and a batch of relayed events (`pagemind_events`, `scheduler.streams.relay`). Each daemon on Postgres
keeps one connection LISTENing on all four and turns a notice into an in-process call. A lost connection is
reconnected with a backoff; meanwhile the dispatcher's slow poll (`DaemonConfig.poll_s`) is the safety net, and
every (re)connect calls `on_connect` once to catch up what was missed. SQLite has no notices: one process's
submissions wake its own dispatcher directly, and other processes find work by the poll.

A submission's notice names its agent (`arrival_notice`: "<source daemon> <agent id> <agent name>"), so the daemon
that hears it takes that agent and its oldest item in one statement (`scheduler.queue.arrivals`) instead of scanning
the inbox: the notice is delivered at the submit's commit, and psycopg's async `notifies()` hands it to the event
loop as it arrives (no polling). A notice without an agent (a batch of trigger firings, items put back) asks for
a scan.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import structlog
from sqlalchemy.engine import Engine

log = structlog.get_logger("pagemind.scheduler")


def arrival_notice(source: str, agent_id: int, name: str) -> str:
    """The `pagemind_inbox` payload of one submission: who submitted it, and for which agent. A NOTIFY payload must
    stay under 8,000 bytes: a name too long for it is left out (the daemon hearing it looks the name up)."""
    return f"{source} {agent_id} {name if len(name.encode()) <= 1000 else ''}".rstrip()


def read_arrival(payload: str) -> tuple[str, int | None, str | None]:
    """(source, agent id, agent name) of a `pagemind_inbox` payload; no agent for a bare source (a batch)."""
    source, _, rest = payload.partition(" ")
    agent, _, name = rest.partition(" ")
    if not agent.isdigit():
        return source, None, None
    return source, int(agent), name or None


class PgWakeups:
    """One LISTEN connection: `handlers[channel](payload)` for each notice (`scheduler.queue.sql` names the channels:
    work arrived from a daemon, an item finished, a run watched, relayed events written), and `on_connect()`
    whenever the connection (again) listens."""

    def __init__(self, engine: Engine, handlers: dict[str, Callable[[str], None]], on_connect: Callable[[], None]):
        self.conninfo = engine.url.set(drivername="postgresql").render_as_string(hide_password=False)
        self.handlers, self.on_connect = handlers, on_connect
        self.listening = asyncio.Event()  # set while the connection listens (tests wait for it)

    async def run(self) -> None:
        """Listen until cancelled, reconnecting after a failure."""
        import psycopg

        pause = 0.1
        while True:
            try:
                async with await psycopg.AsyncConnection.connect(self.conninfo, autocommit=True) as conn:
                    for channel in self.handlers:
                        await conn.execute(f"LISTEN {channel}")
                    self.listening.set()
                    pause = 0.1
                    self.on_connect()  # anything that arrived while not listening
                    async for notice in conn.notifies():
                        handler = self.handlers.get(notice.channel)
                        if handler is not None:
                            handler(notice.payload)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the server went away: reconnect; the poll covers the gap
                self.listening.clear()
                log.warning("listen_lost", error=str(exc)[:200], retry_in=pause)
                await asyncio.sleep(pause)
                pause = min(pause * 2, 5.0)
