"""The turn locks of the agents this daemon works on, held for as long as it holds their leases.

Outside the daemon a turn holds its agent's turn lock (`runtime.state.locks`) from start to end; on Postgres that
is a session advisory lock on a connection of its own. A daemon running 64 agents at once cannot afford a pooled
connection per running agent (two daemons would exhaust `max_connections`, and a pool that runs dry blocks the
event loop), and it does not need a lock per turn: the agent's lease already makes it the only daemon running the
agent. So a daemon takes the same lock (same keys: a `pagemind run` in another process still sees the agent busy,
and the daemon sees a running CLI turn) once per leased agent, all on one connection of its own, awaited
(`runtime.state.async_pg.AwaitedSession`): one session can hold many advisory locks, and they all end with it if
the process dies. On SQLite the lock is the per-agent
`flock` file, held the same way.
"""

from __future__ import annotations

from typing import Any

import structlog

from pagemind.runtime.state.async_pg import AwaitedSession, AwaitedStatements
from pagemind.runtime.state.locks import TRY_TURN_LOCK, TURN_UNLOCK  # the turn lock's keys, shared on purpose
from pagemind.runtime.state.store import StateStore

log = structlog.get_logger("pagemind.scheduler")
# The same statements in psycopg's parameter style (the lock's session is a psycopg async connection).
_STATEMENTS = {sql: sql.replace(":id", "%(id)s") for sql in (TRY_TURN_LOCK, TURN_UNLOCK)}


class HeldAgents:
    """Turn locks held across turns, one per agent this process works on (see the module docstring)."""

    def __init__(self, store: StateStore):
        self.store = store
        awaited = AwaitedStatements.of(store.engine)
        self._session = AwaitedSession(awaited) if awaited is not None else None  # Postgres: the locks' session
        self._held: dict[int, Any] = {}  # agent id → the held context (SQLite) or True (Postgres)

    def holds(self, agent_id: int) -> bool:
        """Whether this process holds the agent's turn lock now."""
        return agent_id in self._held

    async def take(self, agent_id: int) -> bool:
        """Take the agent's turn lock without waiting; False when something else (a CLI turn) holds it."""
        if agent_id in self._held:
            return True
        if self._session is not None:
            got = await self._execute(TRY_TURN_LOCK, agent_id)
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
        if self._session is not None:
            await self._execute(TURN_UNLOCK, agent_id)
        else:
            await held.__aexit__(None, None, None)

    async def release_all(self) -> None:
        """Give every lock back and close the lock connection."""
        for agent_id in list(self._held):
            await self.release(agent_id)
        if self._session is not None:
            self._session.close()

    async def _execute(self, sql: str, agent_id: int) -> Any:
        assert self._session is not None  # run only with a lock session (Postgres)
        try:
            return await self._session.scalar(_STATEMENTS[sql], {"id": agent_id})
        except Exception as exc:  # the session died and every lock with it: the next statement starts a new one
            log.warning("turn_lock_connection_lost", error=str(exc)[:200], held=len(self._held))
            self._held.clear()
            raise
