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

Reads (`memory.archival.ledger_reads`) never trust the vector store alone: only 'live', unsuperseded rows are
listed, counted and let through search, so a half-written memory is invisible even before the next reconcile completes
or removes it. No step leaves a point without a row (points an older pagemind left so stay invisible; see
memory.reconcile). Every transaction that changes what the statistics show moves the agent's row in
`archival_revisions`, which `ArchivalService.stats` reads to know its cache still holds. Each change's history
row is written in its transaction (`memory.archival.versions`).
"""

from __future__ import annotations

import builtins
import contextlib
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import delete, select, update
from sqlalchemy import text as sql
from sqlalchemy.engine import Connection, Engine

from pagemind.runtime.memory.archival.ledger_reads import FORGETTING, INSERTING, LIVE, LedgerReads, record_of
from pagemind.runtime.memory.archival.versions import MemoryVersion, add_version, drop_history
from pagemind.runtime.memory.vectors.records import PINNED, MemoryRecord
from pagemind.runtime.process.crashpoints import crash_point
from pagemind.runtime.state.records import aware, utcnow
from pagemind.runtime.state.tables.archival import archival_memories as memories


def new_token() -> str:
    """A token naming one in-flight write (so only its writer, or a reconcile that saw it, clears it)."""
    return uuid.uuid4().hex


class Ledger:
    """One agent's archival rows: each step of the write order, and the reads (`LedgerReads`) it answers."""

    def __init__(self, agent_id: int, engine: Engine):
        self.agent_id = agent_id
        self.engine = engine
        self.reads = LedgerReads(agent_id, engine)
        # The agent's condition, hidden from the planner, for writes that name ids (see `LedgerReads._by_id`).
        self._by_id = (memories.c.agent_id + 0) == agent_id
        # Revision bumps this object wrote (counted as written even if their transaction then rolled back: a
        # reader that compares it only reads the revision again needlessly, never misses a change).
        self.writes = 0

    # -- reads (`memory.archival.ledger_reads`) ------------------------------------------------------------------

    def origin(self) -> str:
        """This database's identity, which every point it writes carries."""
        return self.reads.origin()

    def revision(self) -> int:
        """The agent's statistics revision (0 before its first change)."""
        return self.reads.revision()

    def stats_rows(self) -> tuple[int, list[tuple[list[str], datetime | None]]]:
        """(revision, [(tags, expires_at)] of every live, unsuperseded memory), the revision read first."""
        return self.reads.stats_rows()

    def live_ids(self, ids: Sequence[str]) -> set[str]:
        """Which of these ids are settled, unsuperseded memories of the agent (what search may return)."""
        return self.reads.live_ids(ids)

    def ids(self) -> set[str]:
        """Every memory id the agent has a row for, whatever its state."""
        return self.reads.ids()

    def rows(self, ids: Sequence[str] | None = None, *, unsettled: bool = False) -> list[Any]:
        """Rows of the agent (some ids, or all; only those a crash may have left half-written if `unsettled`)."""
        return self.reads.rows(ids, unsettled=unsettled)

    def list(self, include_superseded: bool = False) -> list[MemoryRecord]:
        """The agent's settled memories, newest first."""
        return self.reads.list(include_superseded)

    def history(self, memory_id: str) -> builtins.list[MemoryVersion]:  # `list` here is the method above
        """Every recorded change of one of the agent's memories, oldest first."""
        return self.reads.history(memory_id)

    def resolve_id(self, prefix: str) -> str | None:
        """The full id of the agent's listed memory whose id starts with `prefix` (unique), or None."""
        return self.reads.resolve_id(prefix)

    def changed_since(self, since: datetime) -> builtins.list[MemoryRecord]:
        """The agent's live, unsuperseded memories written, refreshed or found by a search at or after `since`."""
        return self.reads.changed_since(since)

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
