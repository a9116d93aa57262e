"""The SQL side of one agent's archival memory, and the order of writes that keeps it agreeing with the vector store.

A memory lives twice: a row in `archival_memories` (listings, statistics, history) and a point in the vector store
(search). No transaction spans both, so every change is made in an order after which a crash at any point leaves
something `memory.reconcile` can finish or undo, with SQL as the record of what was meant:

    insert   1. row written as 'inserting' (naming the memory it will supersede, if any), with its 'insert' version
             2. point upserted (durable on return)
             3. the superseded memory's point marked superseded
             4. row made 'live'; the superseded row marked, with its version.  The caller is answered after this.
    refresh  1. row updated, `write_token` set, 'refresh' version   2. point's payload set   3. token cleared
    rewrite  1. row's text replaced, token set, a version (e.g. 'faded')  2. point upserted (new vector)  3. token
             cleared
    hits     1. hit counts incremented, token set                   2. payloads set          3. token cleared
    forget   1. row made 'forgetting'   2. point deleted   3. row and its history deleted

Reads never trust the vector store alone: only 'live', unsuperseded rows are listed, counted, and let through
search (`live_ids` filters every candidate), so a point whose row is missing, still inserting or being forgotten
is invisible even before the next reconcile completes or removes it. No step leaves a point without a row (points
an older pagemind left so stay invisible; see memory.reconcile). Every transaction that changes what the
statistics show moves the agent's row in `archival_revisions`, which `ArchivalService.stats` reads to know its
cache still holds. Each change's history row is written in its transaction (`memory.archival.versions`).
"""

from __future__ import annotations

import builtins
import contextlib
import json
import re
import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, delete, select, update
from sqlalchemy import text as sql
from sqlalchemy.engine import Connection, Engine

from pagemind.runtime.memory.archival.versions import MemoryVersion, add_version, drop_history, read_history
from pagemind.runtime.memory.vectors.records import PINNED, MemoryRecord
from pagemind.runtime.process.crashpoints import crash_point
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
# ms of CPU; bench/RESULTS.md). `agent_id + 0`: see `Ledger._by_id`.
LIVE_IDS_SQLITE = sql(
    f"SELECT id FROM {memories.name} WHERE id IN (SELECT value FROM json_each(:ids)) "
    f"AND agent_id + 0 = :agent_id AND state = '{LIVE}' AND superseded_by IS NULL"
)


def new_token() -> str:
    """A token naming one in-flight write (so only its writer, or a reconcile that saw it, clears it)."""
    return uuid.uuid4().hex


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


class Ledger:
    """One agent's archival rows: reads that only show settled memories, and each step of the write order."""

    def __init__(self, agent_id: int, engine: Engine):
        self.agent_id = agent_id
        self.engine = engine
        self._mine = memories.c.agent_id == agent_id
        # The same condition, hidden from the planner, for reads and writes that name ids: the primary key finds
        # those rows, while SQLite's planner would walk the agent's whole `agent_id` index for an `IN` list
        # (25 ms at 10,000 memories, on every search).
        self._by_id = (memories.c.agent_id + 0) == agent_id
        self._origin: str | None = None
        # Revision bumps this object wrote (counted as written even if their transaction then rolled back: a
        # reader that compares it only reads the revision again needlessly, never misses a change).
        self.writes = 0

    # -- reads ------------------------------------------------------------------------------------------------

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

    # -- the write order ----------------------------------------------------------------------------------------

    def _transaction(self, conn: Connection | None) -> contextlib.AbstractContextManager[Connection]:
        """The caller's transaction (a group commit's, shared by several inserts), or a new one."""
        return contextlib.nullcontext(conn) if conn is not None else self.engine.begin()

    def begin_insert(
        self,
        record: MemoryRecord,
        token: str,
        supersedes: str | None,
        detail: dict[str, Any],
        conn: Connection | None = None,
    ) -> None:
        """Step 1 of an insert: the row as 'inserting', and its 'insert' version. A row left 'inserting' under
        the same id (an earlier attempt that failed) is replaced. In `conn`'s transaction when given."""
        row = record.model_dump() | {
            "state": INSERTING,
            "write_token": token,
            "write_started": utcnow(),
            "supersedes": supersedes,
        }
        with self._transaction(conn) as conn:
            if conn.execute(
                delete(memories).where(self._by_id, memories.c.id == record.id, memories.c.state == INSERTING)
            ).rowcount:
                drop_history(conn, self.agent_id, record.id)
            conn.execute(memories.insert(), [row])
            crash_point("archival.insert.in_transaction")
            add_version(conn, self.agent_id, record.id, "insert", record.text, detail, record.created_at)

    def complete_insert(self, memory_id: str, similarity: float | None = None, conn: Connection | None = None) -> bool:
        """Step 4: the row becomes live and the memory it supersedes is marked. True when the memory is live
        (now, or already: a reconcile got there first); False when its row is gone or being forgotten. In
        `conn`'s transaction when given."""
        with self._transaction(conn) as conn:
            made_live = conn.execute(
                update(memories)
                .where(self._by_id, memories.c.id == memory_id, memories.c.state == INSERTING)
                .values(state=LIVE, write_token=None, write_started=None)
            ).rowcount
            row = conn.execute(select(memories).where(self._by_id, memories.c.id == memory_id)).mappings().first()
            if not made_live:
                return row is not None and row["state"] == LIVE
            crash_point("archival.complete.in_transaction")
            assert row is not None  # made live just now, in this transaction
            if row["supersedes"]:
                self._mark_superseded(conn, row, similarity)
            self._bump(conn)
        return True

    def _mark_superseded(self, conn: Connection, new: Any, similarity: float | None) -> None:
        at, old_id = aware(new["created_at"]), new["supersedes"]
        old = conn.execute(select(memories.c.text).where(self._by_id, memories.c.id == old_id)).scalar()
        marked = conn.execute(
            update(memories)
            .where(self._by_id, memories.c.id == old_id, memories.c.superseded_by.is_(None))
            .values(superseded_by=new["id"], updated_at=at)
        ).rowcount
        if marked:  # not if forgotten meanwhile
            assert old is not None  # the row just marked: its text (NOT NULL) was read in this transaction
            add_version(
                conn,
                self.agent_id,
                old_id,
                "superseded",
                old,
                {"superseded_by": new["id"], "new_text": new["text"], "similarity": similarity},
                at,
            )

    def rollback_insert(self, memory_id: str) -> bool:
        """Undo step 1 (only while the row is still 'inserting'): the row and its history go."""
        with self.engine.begin() as conn:
            gone = conn.execute(
                delete(memories).where(self._by_id, memories.c.id == memory_id, memories.c.state == INSERTING)
            ).rowcount
            if gone:
                drop_history(conn, self.agent_id, memory_id)
        return bool(gone)

    def begin_refresh(self, memory_id: str, new: MemoryRecord, token: str, similarity: float) -> dict[str, Any] | None:
        """Step 1 of a refresh (a near-copy was written again): the live row's new fields, its token and version.
        Returns the fields for the point, or None when the memory is no longer live (forgotten or superseded)."""
        with self.engine.begin() as conn:
            row = (
                conn.execute(
                    select(memories).where(
                        self._by_id,
                        memories.c.id == memory_id,
                        memories.c.state == LIVE,
                        memories.c.superseded_by.is_(None),
                    )
                )
                .mappings()
                .first()
            )
            if row is None:
                return None
            fields = {
                "updated_at": new.created_at,
                "last_hit_at": new.created_at,
                "tags": sorted(set(row["tags"] or []) | set(new.tags)),
                "importance": max(row["importance"], new.importance),
                "source_message_ids": sorted(set(row["source_message_ids"] or []) | set(new.source_message_ids)),
            }
            conn.execute(
                update(memories)
                .where(self._by_id, memories.c.id == memory_id)
                .values(**fields, hit_count=memories.c.hit_count + 1, write_token=token, write_started=utcnow())
            )
            fields["hit_count"] = conn.execute(
                select(memories.c.hit_count).where(self._by_id, memories.c.id == memory_id)
            ).scalar()
            add_version(
                conn,
                self.agent_id,
                memory_id,
                "refresh",
                row["text"],
                {"duplicate_text": new.text, "similarity": round(similarity, 4), "tags": fields["tags"]},
                new.created_at,
            )
            self._bump(conn)
        return fields

    def begin_rewrite(
        self, memory_id: str, text: str, token: str, operation: str, detail: dict[str, Any], at: datetime
    ) -> MemoryRecord | None:
        """Step 1 of a rewrite in place (same id, new text): the live row's text, its token and an `operation`
        version holding the new text. Returns the row as now written (what the point must become), or None when
        the memory is no longer live (forgotten or superseded)."""
        with self.engine.begin() as conn:
            where = (
                self._by_id,
                memories.c.id == memory_id,
                memories.c.state == LIVE,
                memories.c.superseded_by.is_(None),
            )
            if not conn.execute(
                update(memories)
                .where(*where)
                .values(text=text, updated_at=at, write_token=token, write_started=utcnow())
            ).rowcount:
                return None
            add_version(conn, self.agent_id, memory_id, operation, text, detail, at)
            row = conn.execute(select(memories).where(self._by_id, memories.c.id == memory_id)).mappings().one()
        return record_of(row)

    def begin_pin(self, memory_id: str, token: str, at: datetime) -> dict[str, Any] | None:
        """Step 1 of pinning (`memory.review`): the live row tagged `pinned`, its expiry cleared, a `pin` version.
        Returns the fields for the point, or None when the memory is not live."""
        with self.engine.begin() as conn:
            where = (self._by_id, memories.c.id == memory_id, memories.c.state == LIVE)
            row = conn.execute(select(memories.c.text, memories.c.tags).where(*where)).first()
            if row is None:
                return None
            fields: dict[str, Any] = {"tags": sorted({*(row.tags or []), PINNED}), "expires_at": None}
            conn.execute(update(memories).where(*where).values(**fields, write_token=token, write_started=utcnow()))
            add_version(conn, self.agent_id, memory_id, "pin", row.text, {"tags": fields["tags"]}, at)
            self._bump(conn)
        return fields

    def begin_hits(self, ids: Sequence[str], at: datetime, token: str, count: bool = True) -> dict[str, dict[str, Any]]:
        """Step 1 of counting hits: each live memory's count goes up by one (not if `count` is False: a memory
        shown, not used) and its last hit is `at`. Returns the new fields by id."""
        with self.engine.begin() as conn:
            where = (self._by_id, memories.c.id.in_(list(ids)), memories.c.state == LIVE)
            hits = memories.c.hit_count + 1 if count else memories.c.hit_count
            conn.execute(
                update(memories)
                .where(*where)
                .values(hit_count=hits, last_hit_at=at, write_token=token, write_started=utcnow())
            )
            counts = conn.execute(select(memories.c.id, memories.c.hit_count).where(*where)).all()
        return {memory_id: {"hit_count": count, "last_hit_at": at} for memory_id, count in counts}

    def settle(self, ids: Sequence[str], token: str) -> None:
        """The last step of a refresh or of hit counting: the points agree again (only this write's token)."""
        with self.engine.begin() as conn:
            conn.execute(
                update(memories)
                .where(self._by_id, memories.c.id.in_(list(ids)), memories.c.write_token == token)
                .values(write_token=None, write_started=None)
            )

    def begin_forget(self, memory_id: str) -> bool:
        """Step 1 of forgetting: the row is 'forgetting' (no longer listed, counted or found). False when the
        agent has no such memory."""
        with self.engine.begin() as conn:
            found = conn.execute(
                update(memories)
                .where(self._by_id, memories.c.id == memory_id)
                .values(state=FORGETTING, write_started=utcnow())
            ).rowcount
            if found:
                self._bump(conn)
        return bool(found)

    def end_forget(self, memory_id: str) -> None:
        """The last step of forgetting, once the point is gone: the row and its history."""
        with self.engine.begin() as conn:
            conn.execute(
                delete(memories).where(self._by_id, memories.c.id == memory_id, memories.c.state == FORGETTING)
            )
            drop_history(conn, self.agent_id, memory_id)

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

    def begin_supersede(self, memory_id: str, by: str, token: str, detail: dict[str, Any], at: datetime) -> bool:
        """Step 1 of superseding a memory by another that already exists (a reflection's merge or resolved
        contradiction): the live row marked superseded by `by` with its token set, and its 'superseded' version
        with `detail`, in one transaction. False, writing nothing, when it is not a live, unsuperseded memory of
        the agent: superseding again is a no-op, so a rerun never applies it twice."""
        with self.engine.begin() as conn:
            where = (
                self._by_id,
                memories.c.id == memory_id,
                memories.c.state == LIVE,
                memories.c.superseded_by.is_(None),
            )
            text = conn.execute(select(memories.c.text).where(*where)).scalar()
            if (
                text is None
                or not conn.execute(
                    update(memories)
                    .where(*where)
                    .values(superseded_by=by, updated_at=at, write_token=token, write_started=utcnow())
                ).rowcount
            ):
                return False
            add_version(conn, self.agent_id, memory_id, "superseded", text, {"superseded_by": by, **detail}, at)
            self._bump(conn)
        return True

    # -- helpers ------------------------------------------------------------------------------------------------

    def _bump(self, conn: Connection) -> None:
        self.writes += 1
        conn.execute(
            sql(
                "INSERT INTO archival_revisions (agent_id, revision) VALUES (:a, 1) ON CONFLICT (agent_id) "
                "DO UPDATE SET revision = archival_revisions.revision + 1"
            ),
            {"a": self.agent_id},
        )
