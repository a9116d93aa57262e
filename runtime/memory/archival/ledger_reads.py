"""The read side of one agent's archival rows: what is listed, counted and let through search.

Reads never trust the vector store alone: only 'live', unsuperseded rows are listed, counted and let through
search (`live_ids` filters every candidate), so a point whose row is missing, still inserting or being forgotten is
invisible even before a reconcile completes or removes it. The row states, and the order of writes that moves rows
between them, are `memory.archival.ledger`; `Ledger` answers its reads through the `LedgerReads` here.
"""

from __future__ import annotations

import builtins
import json
import re
import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, select
from sqlalchemy import text as sql
from sqlalchemy.engine import Connection, Engine

from pagemind.runtime.memory.archival.versions import MemoryVersion, read_history
from pagemind.runtime.memory.vectors.records import MemoryRecord
from pagemind.runtime.state.dialects import dialect
from pagemind.runtime.state.records import aware, utcnow
from pagemind.runtime.state.tables.archival import archival_memories as memories
from pagemind.runtime.state.tables.archival import archival_revisions as revisions
from pagemind.runtime.state.tables.archival import database_identity

INSERTING, LIVE, FORGETTING = "inserting", "live", "forgetting"
_IDS_PER_QUERY = 500

# Built once: the statement every turn reads (building the expression costs more than SQLite's primary-key read).
REVISION = select(revisions.c.revision).where(revisions.c.agent_id == bindparam("p_agent_id"))
# Built once, on SQLite: which of a search's ~100 candidates are live, the ids passed as one JSON array. The same
# query built per search with an `IN` list of 100 parameters cost SQLAlchemy more than SQLite's reads (1.35 vs 0.6
# ms of CPU; bench/RESULTS.md). `agent_id + 0`: see `LedgerReads._by_id`.
LIVE_IDS_SQLITE = sql(
    f"SELECT id FROM {memories.name} WHERE id IN (SELECT value FROM json_each(:ids)) "
    f"AND agent_id + 0 = :agent_id AND state = '{LIVE}' AND superseded_by IS NULL"
)


def record_of(row: Any) -> MemoryRecord:
    """A memory record from an `archival_memories` row (datetimes made aware; the bookkeeping columns ignored)."""
    data = dict(row)
    for key in ("created_at", "updated_at", "last_hit_at", "expires_at"):
        if data[key] is not None:
            data[key] = aware(data[key])
    return MemoryRecord(**data)


def _chunks(ids: Sequence[str]) -> Iterable[list[str]]:
    for start in range(0, len(ids), _IDS_PER_QUERY):
        yield list(ids[start : start + _IDS_PER_QUERY])


class LedgerReads:
    """One agent's archival rows as read: only settled memories listed, counted and found."""

    def __init__(self, agent_id: int, engine: Engine):
        self.agent_id = agent_id
        self.engine = engine
        self._mine = memories.c.agent_id == agent_id
        # The same condition, hidden from the planner, for reads that name ids: the primary key finds those rows,
        # while SQLite's planner would walk the agent's whole `agent_id` index for an `IN` list (25 ms at 10,000
        # memories, on every search).
        self._by_id = (memories.c.agent_id + 0) == agent_id
        self._origin: str | None = None

    def origin(self) -> str:
        """This database's identity, which every point it writes carries (made by migration 0004; made here for a
        database that somehow lacks it, the oldest one winning if two processes make one at once)."""
        if self._origin is None:
            query = select(database_identity.c.id).order_by(database_identity.c.created_at, database_identity.c.id)
            with self.engine.begin() as conn:
                found = conn.execute(query.limit(1)).scalar()
                if found is None:
                    conn.execute(database_identity.insert(), [{"id": str(uuid.uuid4()), "created_at": utcnow()}])
                    found = conn.execute(query.limit(1)).scalar()
            self._origin = str(found)
        return self._origin

    def revision(self) -> int:
        """The agent's statistics revision (0 before its first change)."""
        with self.engine.connect() as conn:
            return self._revision(conn)

    def _revision(self, conn: Connection) -> int:
        value = conn.execute(REVISION, {"p_agent_id": self.agent_id}).scalar()
        return int(value or 0)

    def stats_rows(self) -> tuple[int, list[tuple[list[str], datetime | None]]]:
        """(revision, [(tags, expires_at)] of every live, unsuperseded memory). The revision is read first, so
        rows newer than it only make the next check recompute, never a stale cache pass."""
        with self.engine.connect() as conn:
            revision = self._revision(conn)
            rows = conn.execute(
                select(memories.c.tags, memories.c.expires_at).where(
                    self._mine, memories.c.state == LIVE, memories.c.superseded_by.is_(None)
                )
            ).all()
        return revision, [(list(tags or []), aware(expires) if expires else None) for tags, expires in rows]

    def live_ids(self, ids: Sequence[str]) -> set[str]:
        """Which of these ids are settled, unsuperseded memories of the agent (what search may return)."""
        found: set[str] = set()
        with self.engine.connect() as conn:
            if dialect(conn).ids_as_json:
                found.update(
                    conn.execute(
                        LIVE_IDS_SQLITE, {"ids": json.dumps(list(dict.fromkeys(ids))), "agent_id": self.agent_id}
                    ).scalars()
                )
                return found
            for chunk in _chunks(list(dict.fromkeys(ids))):
                found.update(
                    conn.execute(
                        select(memories.c.id).where(
                            self._by_id,
                            memories.c.id.in_(chunk),
                            memories.c.state == LIVE,
                            memories.c.superseded_by.is_(None),
                        )
                    )
                    .scalars()
                    .all()
                )
        return found

    def ids(self) -> set[str]:
        """Every memory id the agent has a row for, whatever its state."""
        with self.engine.connect() as conn:
            return set(conn.execute(select(memories.c.id).where(self._mine)).scalars().all())

    def rows(self, ids: Sequence[str] | None = None, *, unsettled: bool = False) -> list[Any]:
        """Rows of the agent (some ids, or all; only those a crash may have left half-written if `unsettled`)."""
        query = select(memories).where(self._mine if ids is None else self._by_id)
        if ids is not None:
            query = query.where(memories.c.id.in_(list(ids)))
        if unsettled:
            query = query.where((memories.c.state != LIVE) | memories.c.write_token.is_not(None))
        with self.engine.connect() as conn:
            return list(conn.execute(query.order_by(memories.c.created_at)).mappings())

    def list(self, include_superseded: bool = False) -> list[MemoryRecord]:
        """The agent's settled memories, newest first."""
        query = select(memories).where(self._mine, memories.c.state == LIVE)
        if not include_superseded:
            query = query.where(memories.c.superseded_by.is_(None))
        with self.engine.connect() as conn:
            return [record_of(r) for r in conn.execute(query.order_by(memories.c.created_at.desc())).mappings()]

    def history(self, memory_id: str) -> builtins.list[MemoryVersion]:  # `list` here is the method above
        """Every recorded change of one of the agent's memories, oldest first."""
        return read_history(self.engine, self.agent_id, memory_id)

    def resolve_id(self, prefix: str) -> str | None:
        """The full id of the agent's listed memory whose id starts with `prefix` (unique), or None."""
        if not re.fullmatch(r"[0-9a-fA-F-]+", prefix or ""):
            return None  # ids are hex: anything else (an empty string, LIKE wildcards) names nothing
        with self.engine.connect() as conn:
            ids = (
                conn.execute(
                    select(memories.c.id).where(
                        self._mine, memories.c.state == LIVE, memories.c.id.like(f"{prefix.lower()}%")
                    )
                )
                .scalars()
                .all()
            )
        return ids[0] if len(ids) == 1 else None

    def changed_since(self, since: datetime) -> builtins.list[MemoryRecord]:
        """The agent's live, unsuperseded memories written, refreshed or found by a search at or after `since`,
        newest first (what a reflection calls the memories its messages touched)."""
        changed = (
            (memories.c.created_at >= since) | (memories.c.updated_at >= since) | (memories.c.last_hit_at >= since)
        )
        query = select(memories).where(
            self._mine, memories.c.state == LIVE, memories.c.superseded_by.is_(None), changed
        )
        with self.engine.connect() as conn:
            return [record_of(r) for r in conn.execute(query.order_by(memories.c.updated_at.desc())).mappings()]
