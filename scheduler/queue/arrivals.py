"""Taking one agent whose work has just arrived: its lease and its oldest open item in one transaction.

The dispatcher's scan (`Leases.claim_agents`) looks at the heads of the whole inbox; it answers "which agents have
work?" and costs a transaction of its own before the worker's claim (`Inbox.claim_next`), two commits in a row
between a message's submission and its start. When the daemon knows which agent the work is for — it accepted the
message itself, or a Postgres notice named the agent (`scheduler.queue.wakeup`) — it skips the scan: `claim` takes the
agent's lease and marks its oldest open item running in one commit.

The rules are those of the two calls it replaces. The lease is taken only if no one else holds it live (expired or
ours), and only when the agent has an open item (a stale notice takes nothing); the item claimed is the agent's
oldest open one (not necessarily the one that arrived: per-agent order), counted as an attempt. On Postgres it is
one statement (a data-modifying CTE: the lease upsert, then the claim, which sees the lease's RETURNING row); on
SQLite three statements in one `BEGIN IMMEDIATE` transaction. The caller holds the agent's turn lock already
(`scheduler.queue.turnlocks`), so a hinted claim never leaves a claimed item behind a lock it cannot take.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Update, bindparam, exists, literal, select, update
from sqlalchemy.engine import Engine

from pagemind.runtime.state.async_pg import AwaitedStatements
from pagemind.runtime.state.dialects.postgres import POSTGRES
from pagemind.runtime.state.held import write_transaction
from pagemind.runtime.state.tables.daemon import agent_leases, inbox
from pagemind.scheduler.queue.inbox_item import RUNNING, InboxItem, is_open, item_from_row
from pagemind.scheduler.queue.inbox_statements import CLAIM_HEAD, HEAD_ITEM
from pagemind.scheduler.queue.leases import Leases, taking

OPEN_WORK = exists().where(inbox.c.agent_id == bindparam("p_agent_id"), is_open(inbox.c.state))


def _postgres_claim() -> Update:
    """WITH lease AS (INSERT … SELECT … WHERE <open work> ON CONFLICT DO UPDATE … WHERE <expired or ours>
    RETURNING agent_id) UPDATE inbox SET running … WHERE id = <head> AND EXISTS (SELECT FROM lease) RETURNING …"""
    values = select(
        bindparam("p_agent_id", type_=agent_leases.c.agent_id.type),
        bindparam("p_owner", type_=agent_leases.c.owner.type),
        bindparam("p_until", type_=agent_leases.c.expires_at.type),
    ).where(OPEN_WORK)
    insert = POSTGRES.insert(agent_leases).from_select(["agent_id", "owner", "expires_at"], values)
    lease = taking(insert).returning(agent_leases.c.agent_id).cte("lease")
    return (
        update(inbox)
        .where(inbox.c.id == HEAD_ITEM, exists(select(literal(1)).select_from(lease)))
        .values(
            state=RUNNING,
            owner=bindparam("p_owner"),
            lease_expires_at=bindparam("p_until"),
            started_at=bindparam("p_now"),
            attempts=inbox.c.attempts + 1,
        )
        .returning(*inbox.c)
        .add_cte(lease)
    )


_PG_CLAIM = _postgres_claim()


class _Nothing(Exception):
    """No item to claim after all: roll the lease back."""


class Arrivals:
    """The lease-and-claim of one named agent (see the module docstring)."""

    def __init__(self, engine: Engine, leases: Leases):
        self.engine, self.leases = engine, leases
        self.awaited = AwaitedStatements.of(engine)

    async def claim(self, agent_id: int, name: str, now: datetime) -> InboxItem | None:
        """Take the agent's lease and claim its oldest open item for this owner, committed on return; None when it
        has no open item or another daemon holds its lease (nothing is written then)."""
        params = {"p_agent_id": agent_id, "p_owner": self.leases.owner, "p_until": self.leases.until(now), "p_now": now}
        if self.awaited is not None:  # one statement, its own transaction: one round trip, awaited
            row = await self.awaited.first(_PG_CLAIM, params, shape="mapping")
            return item_from_row(row, name) if row is not None else None
        try:
            with write_transaction(self.engine) as conn:  # BEGIN IMMEDIATE: no one writes between look and claim
                if not conn.execute(select(OPEN_WORK), params).scalar():
                    return None
                if not self.leases._take(conn, agent_id, now):
                    return None
                row = conn.execute(CLAIM_HEAD, params).first()
                if row is None:
                    raise _Nothing
        except _Nothing:
            return None
        return item_from_row(row, name)
