"""One turn at a time per agent: a lock held for a whole turn, shared by every task and process on one database.

- Postgres: a session-level `pg_try_advisory_lock(schema key, agent id)` on a connection of its own, held (out of
  the pool's reach) for the turn and unlocked, then closed, at its end. If the process dies the server ends the
  session and the lock goes with it.
- SQLite: the database is one file, so the lock is an `flock` on a file beside it, one per agent
  (`<database>.turns/<agent id>.lock`). A lock row with a lease was the alternative; it would need a heartbeat
  and would hold a killed process's agent until the lease ran out, where the kernel drops a dead process's `flock`
  at once. `flock` locks belong to an open file, so two tasks of one process exclude each other too.
- An in-memory SQLite database (one process by construction) gets an in-process lock per agent.

Waiting polls the non-blocking form with a short backoff on the event loop: a wait can be cancelled at any point
without leaving a lock behind, and no thread is parked in a blocking call.
"""

from __future__ import annotations

import asyncio
import contextlib
import fcntl
import os
import threading
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path

import structlog
from sqlalchemy import text
from sqlalchemy.engine import Connection, Engine

from pagemind.runtime.state.dialects import dialect

log = structlog.get_logger("pagemind.locks")

# The two-key advisory lock: (this schema's key space, the agent's id). Advisory locks are per database, not per
# schema, and agent ids restart in every schema: two pagemind stores in two schemas of one database (tenants,
# parallel test runs) would otherwise lock each other's agents. The key space is a hash of the schema's name.
TRY_TURN_LOCK = "SELECT pg_try_advisory_lock(hashtext('pagemind.turn:' || current_schema()), :id)"
TURN_UNLOCK = "SELECT pg_advisory_unlock(hashtext('pagemind.turn:' || current_schema()), :id)"
_POLL_FIRST, _POLL_MAX = 0.005, 0.1  # seconds between tries while another holder has the agent
_local_locks: dict[tuple[str, int], threading.Lock] = {}
_local_guard = threading.Lock()


class AgentBusy(RuntimeError):
    """Another turn held the agent for longer than the caller would wait."""

    def __init__(self, agent: str | int, waited: float):
        super().__init__(
            f"agent busy: another turn of '{agent}' has held it for {waited:g} s "
            "(wait longer with --wait SECONDS); nothing was stored"
        )
        self.agent, self.waited = agent, waited


@contextlib.asynccontextmanager
async def turn_lock(engine: Engine, agent_id: int, wait: float, label: str | int | None = None) -> AsyncIterator[None]:
    """Hold agent `agent_id`'s turn lock for the block; waits up to `wait` seconds, then raises `AgentBusy`."""
    try_lock, release = _lock_for(engine, agent_id)
    deadline, pause = time.monotonic() + max(wait, 0.0), _POLL_FIRST
    while not try_lock():
        if time.monotonic() >= deadline:
            raise AgentBusy(label if label is not None else agent_id, wait)
        await asyncio.sleep(min(pause, max(deadline - time.monotonic(), 0.0)))
        pause = min(pause * 2, _POLL_MAX)
    try:
        yield
    finally:
        release()


def _lock_for(engine: Engine, agent_id: int) -> tuple[Callable[[], bool], Callable[[], None]]:
    backend = dialect(engine)
    if backend.session_locks:
        return _advisory_lock(engine, agent_id)
    database = backend.database_file(engine.url)
    if database is not None:
        return _file_lock(database, agent_id)
    return _local_lock(str(engine.url), agent_id)


def _advisory_lock(engine: Engine, agent_id: int) -> tuple[Callable[[], bool], Callable[[], None]]:
    held: list[Connection] = []

    def try_lock() -> bool:
        conn = engine.connect()
        try:
            got = conn.execute(text(TRY_TURN_LOCK), {"id": agent_id}).scalar()
            conn.commit()  # the session-level lock outlives the transaction; the connection stays out of the pool
        except BaseException:
            conn.invalidate()
            conn.close()
            raise
        if got:
            held.append(conn)
        else:
            conn.close()
        return bool(got)

    def release() -> None:
        conn = held.pop()
        try:
            conn.execute(text(TURN_UNLOCK), {"id": agent_id})
            conn.commit()
        except Exception as exc:  # a dead connection: its session, and so the lock, ended with it
            log.warning("turn_unlock_failed", agent_id=agent_id, error=str(exc))
            conn.invalidate()  # never hand a session that may still hold the lock back to the pool
        finally:
            conn.close()

    return try_lock, release


def _file_lock(database: Path, agent_id: int) -> tuple[Callable[[], bool], Callable[[], None]]:
    folder = database.with_name(database.name + ".turns")
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{agent_id}.lock"
    held: list[int] = []

    def try_lock() -> bool:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            return False
        held.append(fd)
        return True

    def release() -> None:
        fd = held.pop()
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)

    return try_lock, release


def _local_lock(url: str, agent_id: int) -> tuple[Callable[[], bool], Callable[[], None]]:
    with _local_guard:
        lock = _local_locks.setdefault((url, agent_id), threading.Lock())
    return (lambda: lock.acquire(blocking=False)), lock.release
