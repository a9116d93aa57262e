"""The turn locks of the agents this daemon works on, held for as long as it holds their leases.

Outside the daemon a turn holds its agent's turn lock (`runtime.state.locks`) from start to end; on Postgres that
is a session advisory lock on a connection of its own. A daemon running 64 agents at once cannot afford a pooled
connection per running agent (two daemons would exhaust `max_connections`, and a pool that runs dry blocks the
event loop), and it does not need a lock per turn: the agent's lease already makes it the only daemon running the
agent. So a daemon takes the same lock (same keys: a `pagemind run` in another process still sees the agent busy,
and the daemon sees a running CLI turn) once per leased agent, all on one connection of its own: one session can
hold many advisory locks, and they all end with it if the process dies. On SQLite the lock is the per-agent
`flock` file, held the same way.
"""

from __future__ import annotations

import contextlib
from typing import Any

import structlog
from sqlalchemy import text
from sqlalchemy.engine import Connection

from pagemind.runtime.state.locks import TRY_TURN_LOCK, TURN_UNLOCK  # the turn lock's keys, shared on purpose
from pagemind.runtime.state.store import StateStore

log = structlog.get_logger("pagemind.scheduler")


class HeldAgents:
    """Turn locks held across turns, one per agent this process works on (see the module docstring)."""

    def __init__(self, store: StateStore):
        self.store = store
        self.postgres = store.engine.dialect.name == "postgresql"
        self._conn: Connection | None = None
        self._held: dict[int, Any] = {}  # agent id → the held context (SQLite) or True (Postgres)

    def holds(self, agent_id: int) -> bool:
        """Whether this process holds the agent's turn lock now."""
        return agent_id in self._held

    async def take(self, agent_id: int) -> bool:
        """Take the agent's turn lock without waiting; False when something else (a CLI turn) holds it."""
        if agent_id in self._held:
            return True
        if self.postgres:
            got = self._execute(TRY_TURN_LOCK, agent_id)
            if got:
                self._held[agent_id] = True
            return bool(got)
        held = self.store.turn_lock(agent_id, 0)
        try:
            await held.__aenter__()
        except Exception:  # AgentBusy
            return False
        self._held[agent_id] = held
        return True

    async def release(self, agent_id: int) -> None:
        """Give the agent's turn lock back."""
        held = self._held.pop(agent_id, None)
        if held is None:
            return
        if self.postgres:
            self._execute(TURN_UNLOCK, agent_id)
        else:
            await held.__aexit__(None, None, None)

    async def release_all(self) -> None:
        """Give every lock back and close the lock connection."""
        for agent_id in list(self._held):
            await self.release(agent_id)
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None

    def _execute(self, sql: str, agent_id: int) -> Any:
        if self._conn is None:  # autocommit: a session lock needs no transaction, so no COMMIT round trip
            self._conn = self.store.engine.connect().execution_options(isolation_level="AUTOCOMMIT")
        try:
            return self._conn.execute(text(sql), {"id": agent_id}).scalar()
        except Exception as exc:  # the session died and every lock with it: start a new one
            log.warning("turn_lock_connection_lost", error=str(exc)[:200], held=len(self._held))
            with contextlib.suppress(Exception):
                self._conn.invalidate()
            self._conn = None
            self._held.clear()
            raise
