"""Who runs an agent's work now: one owner per agent at a time, across every daemon process on the database.

A daemon takes an agent by writing its lease (`agent_leases`: owner, expires_at) and keeps it while the agent
has work, renewing every lease it holds from a heartbeat; it gives it back when the agent's inbox is empty. A
lease past its expiry belongs to no one: its owner died or stalled, and the next daemon to look takes the agent,
with its running item, over. Taking a lease is one upsert (`INSERT … ON CONFLICT DO UPDATE … WHERE the old lease
expired or is ours`), atomic on both databases.

Which agents to take: the heads of the inbox (each agent's oldest open item) whose agent no live lease holds, in
arrival order. On Postgres the heads are read with `FOR UPDATE SKIP LOCKED` in the transaction that writes the
leases, so two daemons looking at once take different agents instead of racing for the same ones; on SQLite the
transaction is `BEGIN IMMEDIATE` (one writer at a time).

The `daemons` table lists the processes serving the database (host, pid, URL, heartbeat). A daemon on the same
host whose process is gone (SIGKILL, a crash) has its leases ended at once by the next daemon that starts or
sweeps there, so a restarted daemon resumes in milliseconds rather than after `lease_s`.

Lease times are wall-clock UTC of each daemon's host: hosts sharing a database need synchronised clocks (NTP),
and `lease_s` (30 s by default) must exceed any skew between them.
"""

from __future__ import annotations

import os
import socket
from datetime import UTC, datetime, timedelta
from typing import Any

import structlog
from sqlalchemy import bindparam, delete, exists, select, update
from sqlalchemy.engine import Connection, Engine

from pagemind.runtime.state.async_pg import AwaitedStatements
from pagemind.runtime.state.dialects import dialect
from pagemind.runtime.state.held import read_connection, single_statement, write_transaction
from pagemind.runtime.state.tables.daemon import agent_leases, daemons, inbox
from pagemind.scheduler.queue.inbox_item import is_open, is_running

log = structlog.get_logger("pagemind.scheduler")
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def new_owner_id() -> str:
    """This process's identity as a lease owner: host, pid and a random part (a restarted pid is a new owner)."""
    import uuid

    return f"{socket.gethostname()[:40]}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def taking(insert: Any) -> Any:
    """An `agent_leases` insert (a dialect's, of `p_owner` and `p_until`) that takes the lease when it is free,
    expired (before `p_now`) or ours already, and leaves another owner's live lease alone."""
    return insert.on_conflict_do_update(
        index_elements=[agent_leases.c.agent_id],
        set_={"owner": insert.excluded.owner, "expires_at": insert.excluded.expires_at},
        where=(agent_leases.c.expires_at < bindparam("p_now")) | (agent_leases.c.owner == bindparam("p_owner")),
    )


class _Statements:
    """The per-agent lease statements of one dialect, built once with bound parameters (building a statement per
    call costs more CPU, building it and then its cache key, than running it does)."""

    def __init__(self, engine: Engine):
        backend = dialect(engine)
        insert = backend.insert(agent_leases).values(
            agent_id=bindparam("p_agent_id"), owner=bindparam("p_owner"), expires_at=bindparam("p_until")
        )
        self.take = taking(insert).returning(agent_leases.c.agent_id)
        self.release = delete(agent_leases).where(
            agent_leases.c.owner == bindparam("p_owner"), agent_leases.c.agent_id == bindparam("p_agent_id")
        )
        self.has_open = exists().where(inbox.c.agent_id == bindparam("p_agent_id"), is_open(inbox.c.state))
        self.release_looking = self.release.returning(self.has_open)
        self.has_open_read = select(self.has_open)
        older = inbox.alias("older")
        head = ~exists().where(older.c.agent_id == inbox.c.agent_id, is_open(older.c.state), older.c.id < inbox.c.id)
        held = exists().where(
            agent_leases.c.agent_id == inbox.c.agent_id,
            agent_leases.c.expires_at >= bindparam("p_now"),
            agent_leases.c.owner != bindparam("p_owner"),
        )
        heads = (
            select(inbox.c.agent_id)
            .where(is_open(inbox.c.state), head, ~held, inbox.c.agent_id.not_in(bindparam("p_exclude", expanding=True)))
            .order_by(inbox.c.id)
            .limit(bindparam("p_limit"))
        )
        # Two daemons looking at once skip each other's rows instead of racing for the same agents.
        self.heads = backend.skip_locked(heads, inbox)


class Leases:
    """Agent leases and the daemons registry for one owner (this process)."""

    def __init__(self, engine: Engine, owner: str, lease_s: float):
        self.engine, self.owner, self.lease_s = engine, owner, lease_s
        self.awaited = AwaitedStatements.of(engine)
        self._statements = _Statements(engine)

    def until(self, now: datetime) -> datetime:
        """When a lease written now expires."""
        return now + timedelta(seconds=self.lease_s)

    def _take(self, conn: Connection, agent_id: int, now: datetime) -> bool:
        return (
            conn.execute(
                self._statements.take,
                {"p_agent_id": agent_id, "p_owner": self.owner, "p_until": self.until(now), "p_now": now},
            ).first()
            is not None
        )

    def claim_agents(self, limit: int, exclude: set[int], now: datetime) -> list[int]:
        """Take the leases of up to `limit` agents with open work that no one else holds, oldest work first;
        returns their ids (`exclude`: agents this process runs already)."""
        if limit <= 0:
            return []
        with write_transaction(self.engine) as conn:
            candidates = list(
                dict.fromkeys(
                    conn.execute(
                        self._statements.heads,
                        {"p_now": now, "p_owner": self.owner, "p_exclude": sorted(exclude), "p_limit": limit},
                    ).scalars()
                )
            )
            return [agent_id for agent_id in candidates if self._take(conn, agent_id, now)]

    def take(self, agent_id: int, now: datetime) -> bool:
        """Take (or keep) one agent's lease if no one else holds it live (one statement, its own transaction)."""
        with single_statement(self.engine) as conn:
            return self._take(conn, agent_id, now)

    def release(self, agent_id: int | None = None) -> None:
        """Give back one agent's lease (or all of this owner's)."""
        if agent_id is None:
            with write_transaction(self.engine) as conn:
                conn.execute(delete(agent_leases).where(agent_leases.c.owner == self.owner))
            return
        with single_statement(self.engine) as conn:  # one statement, its own transaction
            conn.execute(self._statements.release, {"p_owner": self.owner, "p_agent_id": agent_id})

    async def release_looking(self, agent_id: int) -> bool:
        """Give back the agent's lease and say whether it has open items, as seen once the release is committed (an
        item submitted meanwhile found the agent leased and left it to us), in one statement: on Postgres an item
        committed after it began either is seen or finds the lease gone (its submitter's take waits for the
        deletion to commit); awaited there (`runtime.state.async_pg`). When the lease was not ours (taken over), a
        plain read."""
        params = {"p_owner": self.owner, "p_agent_id": agent_id}
        if self.awaited is not None:
            row = await self.awaited.first(self._statements.release_looking, params)
            if row is None:
                row = await self.awaited.one(self._statements.has_open_read, params)
            return bool(row[0])
        with single_statement(self.engine) as conn:
            row = conn.execute(self._statements.release_looking, params).first()
            if row is None:
                row = conn.execute(self._statements.has_open_read, params).one()
        return bool(row[0])

    def renew(self, agent_ids: set[int], now: datetime) -> set[int]:
        """Extend the leases this owner holds on `agent_ids` (and its running items'); returns those it no longer
        holds (taken over after a stall: the worker stops after its current item)."""
        if not agent_ids:
            return set()
        until = self.until(now)
        with write_transaction(self.engine) as conn:
            kept = set(
                conn.execute(
                    update(agent_leases)
                    .where(agent_leases.c.owner == self.owner, agent_leases.c.agent_id.in_(sorted(agent_ids)))
                    .values(expires_at=until)
                    .returning(agent_leases.c.agent_id)
                ).scalars()
            )
            conn.execute(
                update(inbox)
                .where(inbox.c.owner == self.owner, is_running(inbox.c.state))
                .values(lease_expires_at=until)
            )
        return agent_ids - kept

    # -- the daemons registry ------------------------------------------------------------------------------------

    def register(self, url: str, now: datetime) -> None:
        """Add this process to `daemons`."""
        with write_transaction(self.engine) as conn:
            conn.execute(
                daemons.insert().values(
                    id=self.owner,
                    url=url,
                    pid=os.getpid(),
                    host=socket.gethostname()[:255],
                    started_at=now,
                    heartbeat_at=now,
                )
            )

    def heartbeat(self, now: datetime) -> None:
        """Say this process is alive."""
        with write_transaction(self.engine) as conn:
            conn.execute(update(daemons).where(daemons.c.id == self.owner).values(heartbeat_at=now))

    def unregister(self) -> None:
        """Take this process out of `daemons` and give back every lease it holds."""
        with write_transaction(self.engine) as conn:
            conn.execute(delete(agent_leases).where(agent_leases.c.owner == self.owner))
            conn.execute(delete(daemons).where(daemons.c.id == self.owner))

    def sweep(self, now: datetime) -> int:
        """End the leases of dead daemons: those on this host whose process is gone, and any whose heartbeat is
        older than three leases; returns how many daemons were swept."""
        host, stale = socket.gethostname()[:255], now - timedelta(seconds=3 * self.lease_s)
        with read_connection(self.engine) as conn:
            rows = conn.execute(
                select(daemons.c.id, daemons.c.host, daemons.c.pid, daemons.c.heartbeat_at).where(
                    daemons.c.id != self.owner
                )
            ).all()
        dead = [
            r.id
            for r in rows
            if (r.host == host and not _alive(r.pid))
            or (r.heartbeat_at.replace(tzinfo=r.heartbeat_at.tzinfo or UTC) < stale)
        ]
        if dead:
            with write_transaction(self.engine) as conn:
                conn.execute(update(agent_leases).where(agent_leases.c.owner.in_(dead)).values(expires_at=EPOCH))
                conn.execute(delete(daemons).where(daemons.c.id.in_(dead)))
            log.info("daemons_swept", dead=dead)
        return len(dead)

    def holders(self) -> dict[int, str]:
        """Every live-or-not lease: agent id → owner (for inspection and tests)."""
        with read_connection(self.engine) as conn:
            return dict(conn.execute(select(agent_leases.c.agent_id, agent_leases.c.owner)).all())


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True
