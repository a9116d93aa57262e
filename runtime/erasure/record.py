"""The pending-purge record (`purges`, migration 0009): written before anything is erased, read at every open.

An agent is hidden in the transaction that records its purge: renamed (its name is free again), its daemon origin
deleted (the daemon stops serving it), its open inbox items failed. Every listing leaves out an agent with a row
here. The row goes when nothing of the agent is left.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import delete, select, update
from sqlalchemy.engine import Connection, Engine

from pagemind.runtime.state.tables.agents import AgentRow
from pagemind.runtime.state.tables.daemon import agent_origins, inbox
from pagemind.runtime.state.tables.schema import table_of
from pagemind.runtime.state.tables.security import purges

HIDDEN_PREFIX = ".purging-"  # an agent being purged is called `.purging-ID` (no spec name starts with a dot)
RECORDED, ERASED = "recorded", "erased"  # the purge's steps: its rows still there, or gone (compaction left)
_AGENTS = table_of(AgentRow)


@dataclass
class Pending:
    """One agent's purge in progress, as recorded."""

    agent_id: int
    name: str
    step: str
    attempts: int
    counts: dict[str, dict[str, int]] = field(default_factory=dict)


def record(conn: Connection, agents: Sequence[tuple[int, str]], now: datetime) -> None:
    """Record the purge of `agents` (id, name) and hide them, in the caller's transaction. An agent already
    pending keeps its record."""
    ids = [agent_id for agent_id, _ in agents]
    known = set(conn.execute(select(purges.c.agent_id).where(purges.c.agent_id.in_(ids))).scalars())
    fresh = [
        {"agent_id": i, "name": n, "step": RECORDED, "attempts": 0, "counts": {}, "requested_at": now}
        for i, n in agents
        if i not in known
    ]
    if fresh:
        conn.execute(purges.insert(), fresh)
    for agent_id in ids:
        conn.execute(update(_AGENTS).where(_AGENTS.c.id == agent_id).values(name=f"{HIDDEN_PREFIX}{agent_id}"))
    conn.execute(delete(agent_origins).where(agent_origins.c.agent_id.in_(ids)))
    conn.execute(
        update(inbox)
        .where(inbox.c.agent_id.in_(ids), inbox.c.state.in_(("pending", "running")))
        .values(state="failed", error="the agent was purged", finished_at=now)
    )


def pending(engine: Engine, ids: Sequence[int] | None = None) -> list[Pending]:
    """The purges in progress (of `ids`, or all), oldest first."""
    query = select(purges).order_by(purges.c.requested_at, purges.c.agent_id)
    if ids is not None:
        query = query.where(purges.c.agent_id.in_(list(ids)))
    with engine.connect() as conn:
        rows = conn.execute(query).all()
    return [Pending(r.agent_id, r.name, r.step, r.attempts, dict(r.counts or {})) for r in rows]


def any_pending(engine: Engine) -> bool:
    """Whether a purge is in progress (one indexed read: what every open pays)."""
    with engine.connect() as conn:
        return conn.execute(select(purges.c.agent_id).limit(1)).first() is not None


def started(engine: Engine, ids: Sequence[int]) -> None:
    """Count an attempt at these purges (a count above one: the purge is resumed)."""
    with engine.begin() as conn:
        conn.execute(update(purges).where(purges.c.agent_id.in_(list(ids))).values(attempts=purges.c.attempts + 1))


def progress(conn: Connection, item: Pending, step: str, counts: dict[str, dict[str, int]]) -> None:
    """Store the purge's step and what it erased so far (added to what earlier attempts erased)."""
    merged = {store: dict(values) for store, values in item.counts.items()}
    for store, values in counts.items():
        into = merged.setdefault(store, {})
        for key, count in values.items():
            into[key] = into.get(key, 0) + count
    item.step, item.counts = step, merged
    conn.execute(update(purges).where(purges.c.agent_id == item.agent_id).values(step=step, counts=merged))


def forget(conn: Connection, ids: Sequence[int]) -> None:
    """The purges are over: their rows go."""
    conn.execute(delete(purges).where(purges.c.agent_id.in_(list(ids))))


def summary(counts: dict[str, dict[str, int]]) -> str:
    """What a purge erased, in one line: the rows per table, the vector points, the trace files."""
    sql = counts.get("sql", {})
    tables = ", ".join(f"{table} {count}" for table, count in sorted(sql.items()))
    return (
        f"{sum(sql.values())} rows ({tables or 'none'}), "
        f"{counts.get('vectors', {}).get('points', 0)} vector points, "
        f"{counts.get('traces', {}).get('files', 0)} trace files"
    )
