"""Opening the archival store for a command while another process may hold it, and finding the daemon that
serves this database (`live_daemon_url`: a command beside it goes through it, or says which route does the job).

The embedded Qdrant store has one writer process. A command opens it before it stores anything (a turn that found
it held only after storing the user's message left that message unanswered). Held by another command: wait up to
`--wait` seconds, as a turn waits for the agent's turn lock. Held by a daemon serving this database: waiting would
not help (a daemon holds it until it stops), so the command says which of the daemon's routes does what it asked.
"""

from __future__ import annotations

import asyncio
import os
import socket
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from pagemind.runtime.cli.shared import CliError, notice

if TYPE_CHECKING:
    from pagemind.runtime.process.settings import Settings

LIVE_S = 90.0  # a daemon whose heartbeat is older than this is dead (three default leases: scheduler/queue/leases.py)
POLL_S = 0.2  # how often a waiting command tries the store again: a turn elsewhere takes seconds, not milliseconds


async def open_archival(
    archival: object | None, settings: Settings, wait: float, through_daemon: Callable[[str], str]
) -> None:
    """Open `archival`'s store, waiting up to `wait` seconds while another pagemind command holds it. Busy (exit 3)
    after that, or at once when a daemon serving this database holds it: the message then names what to do
    through the daemon (`through_daemon(url)`). Any other failure to open: exit 2."""
    from pagemind.runtime.memory.vectors.records import StoreError, StoreLocked

    if archival is None:
        return
    deadline = time.monotonic() + max(0.0, wait)
    waiting = False
    while True:
        try:
            getattr(archival, "store", None)  # the archival service opens its store on first use
            return
        except StoreLocked as exc:
            url = await asyncio.to_thread(live_daemon_url, settings)
            if url is not None:
                raise CliError(
                    f"the daemon at {url} serves this database and holds its archival store: {through_daemon(url)}. "
                    "Nothing was stored.",
                    code=3,
                ) from None
            left = deadline - time.monotonic()
            if left <= 0:
                raise CliError(f"{exc} Waited {wait:g} s (--wait SECONDS). Nothing was stored.", code=3) from None
            if not waiting:
                notice(f"waiting up to {wait:g} s for the archival store, which another process has open")
                waiting = True
            await asyncio.sleep(min(POLL_S, left))
        except StoreError as exc:
            raise CliError(f"{exc} Nothing was stored.", code=2) from None


def live_daemon_url(settings: Settings, now: datetime | None = None) -> str | None:
    """The URL of a daemon serving the database of `settings` with a fresh heartbeat (on this host: its process
    still running), or None. Reads SQL only."""
    from sqlalchemy import select

    from pagemind.runtime.state.engine import make_engine
    from pagemind.runtime.state.tables.daemon import daemons

    now = now or datetime.now(UTC)
    engine = make_engine(settings.database_url)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                select(daemons.c.url, daemons.c.host, daemons.c.pid, daemons.c.heartbeat_at).order_by(
                    daemons.c.heartbeat_at.desc()
                )
            ).all()
    except Exception:  # no database yet, or one that predates the table: no daemon serves it
        return None
    finally:
        engine.dispose()
    here = socket.gethostname()[:255]
    for row in rows:
        beat = row.heartbeat_at if row.heartbeat_at.tzinfo else row.heartbeat_at.replace(tzinfo=UTC)
        if now - beat > timedelta(seconds=LIVE_S):
            continue
        if row.host == here and not alive(row.pid):
            continue
        url: str | None = row.url
        return url
    return None


def alive(pid: int) -> bool:
    """Whether a process with this id runs on this host (one we may not signal counts as running)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
