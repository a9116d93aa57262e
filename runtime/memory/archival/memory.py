"""Archival memory for one agent: the write path (date, dedupe, supersede), the entry to hybrid search, inspection.

    archival = ArchivalService(agent_id=record.id, engine=..., open_backend=..., embedder=..., config=...)
    result = await archival.insert("Lin started a new job today", tags=["work"])
    hits = await archival.search("where does Lin work?")

An agent's memories are keyed by its id (`agents.id`), in SQL and in the vector store alike, so renaming the
agent keeps them. Vectors and the payload used for filtered search live in Qdrant (`memory.stores`); SQL holds
the same metadata (`archival_memories`: listings and statistics that work without opening the vector store) and
every change to a memory (`archival_memory_versions`), so nothing is overwritten without a trace. `forget`
deletes a memory from both, history included. The write path's decisions are `memory.write_policy`; the order
of its writes, which keeps SQL and the store agreeing through any crash, is `memory.ledger`, and what a crash
left half-done is finished or undone by `memory.reconcile` when the store is opened. Counts and searches always
read the database (a second process or service instance sees every write at once); a cache of the statistics
is checked against the agent's revision, one primary-key read. A search's ranking is `memory.archival.search`.
Changes to memories already stored (rewrite, supersede, pin, forget) are `memory.archival.changes`.
"""

from __future__ import annotations

import asyncio
import builtins
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Any, Literal

import numpy as np
import structlog
from sqlalchemy.engine import Engine

from pagemind.runtime.crypto.columns import cipher_of
from pagemind.runtime.memory.archival.changes import ArchivalChanges
from pagemind.runtime.memory.archival.filed_from import context_texts
from pagemind.runtime.memory.archival.group_commit import PendingInsert, group_commit
from pagemind.runtime.memory.archival.ledger import Ledger, new_token
from pagemind.runtime.memory.archival.reads import ArchivalReads
from pagemind.runtime.memory.archival.reconcile import reconcile_once
from pagemind.runtime.memory.archival.rekey import complete_rekeys
from pagemind.runtime.memory.archival.search import ArchivalSearch
from pagemind.runtime.memory.archival.stats_cache import StatsCache
from pagemind.runtime.memory.archival.versions import MemoryVersion
from pagemind.runtime.memory.archival.write_policy import decide, keyword_document, normalise_text
from pagemind.runtime.memory.embedding.cache import embed_for_write, write_cache_rows
from pagemind.runtime.memory.embedding.embedders import Embedder
from pagemind.runtime.memory.lifecycle.activity import ActiveDays
from pagemind.runtime.memory.lifecycle.expiry import expiry_from_wording
from pagemind.runtime.memory.topics import MutedTopics
from pagemind.runtime.memory.vectors.backend import AgentStore, ArchivalBackend
from pagemind.runtime.memory.vectors.records import Hit, MemoryRecord, Sparse, StoredPoint
from pagemind.runtime.process.crashpoints import crash_point
from pagemind.runtime.spec.memory import ArchivalConfig
from pagemind.runtime.state.records import utcnow, without_nul
from pagemind.tools.context import MEMORY_KINDS, ArchivalHit, InsertResult

__all__ = ["ArchivalService"]

log = structlog.get_logger("pagemind.archival")


class ArchivalService:
    """Archival memory of one agent (implements `tools.ArchivalMemory`). Scoped at construction: nothing a
    caller passes can reach another agent's memories."""

    def __init__(
        self,
        agent_id: int,
        *,
        engine: Engine,
        open_backend: Callable[[], ArchivalBackend],
        embedder: Embedder,
        config: ArchivalConfig | None = None,
        clock: Callable[[], datetime] = utcnow,
        user_id: str | None = None,
    ):
        self.agent_id = agent_id
        self.user_id = user_id
        self.engine = engine
        self.embedder = embedder
        self.config = config or ArchivalConfig()
        self.clock = clock
        self.ledger = Ledger(agent_id, engine)
        self._open_backend = open_backend
        self._store: AgentStore | None = None
        self._write_lock = asyncio.Lock()
        self._stats_cache = StatsCache(self.ledger, clock)
        self._bm25: Any = None
        self.activity = ActiveDays(agent_id, engine)  # the days disuse is counted in (`memory.decay`)
        self.reads = ArchivalReads(self)  # every read a turn makes, through the agent's tape (`memory.reads`)
        self.searcher = ArchivalSearch(self)  # a search's ranking and hit counts, below `search`
        self.mutes: MutedTopics | None = None  # results touching a muted topic are left out (`memory.topics`)
        self.changes = ArchivalChanges(self)  # rewrites, supersedes, pins and forgetting (`memory.archival.changes`)

    @property
    def context_messages(self) -> int:
        """How many of the latest messages an insert is filed from (`memory.archival.context_messages`)."""
        return self.config.context_messages

    # -- plumbing ---------------------------------------------------------------------------------------------

    @property
    def store(self) -> AgentStore:
        """This agent's view of the vector store, opened on first use: its pending re-keying completed, then what
        a crash left half-written reconciled (once per process), before any read or write."""
        if self._store is None:
            backend = self._open_backend()
            backend.seal_with(cipher_of(self.engine))
            complete_rekeys(self.engine, backend)
            store = AgentStore(backend, self.agent_id, self.ledger.origin())
            reconcile_once(self.ledger, store, backend, restore=self.points, model=self.embedder.model_id)
            self._store = store
        return self._store

    def keyword_vector(self, text: str, query: bool = False) -> Sparse:
        """The keyword vector of analysed terms; with encryption on, of their keyed hashes (a blind index: the
        store's sparse indices are hashes of what it is given, so it never sees a term)."""
        if (cipher := cipher_of(self.engine)) is not None:
            text = cipher.blind_terms(text)
        if self._bm25 is None:
            from qdrant_edge import Bm25, Bm25Config

            self._bm25 = Bm25(Bm25Config(language="english", avg_len=self.config.keyword_avg_len))
        vector = self._bm25.embed_query(text) if query else self._bm25.embed_document(text)
        return Sparse(list(vector.indices), list(vector.values))

    def points(self, records: list[MemoryRecord]) -> list[StoredPoint]:
        """Points for memories whose point is missing (see memory.reconcile; a replay's memories read from its
        trace), embedded again from their text (and the keywords of the conversation they were filed from)."""
        vectors = self.embedder.embed([r.text for r in records])
        return [StoredPoint(r, v, s) for r, v, s in zip(records, vectors, self.keyword_vectors(records), strict=True)]

    def keyword_vectors(self, records: list[MemoryRecord]) -> list[Sparse]:
        """The keyword (sparse) vectors of records: text, date and the conversation filed from (`filed_from`)."""
        context = context_texts(
            self.engine, self.agent_id, records, self.config.context_messages, self.config.context_chars
        )
        return [self.keyword_vector(keyword_document(r, context.get(r.id, ""))) for r in records]

    # -- write path -------------------------------------------------------------------------------------------

    async def insert(
        self,
        content: str,
        *,
        kind: str = "fact",
        tags: list[str] | None = None,
        importance: float | None = None,
        source_message_ids: list[int] | None = None,
        expires_at: datetime | None = None,
    ) -> InsertResult:
        """Store a memory: normalise and date it, then refresh a near-duplicate, supersede a contradicted
        memory, or insert it. Durable, listed and searchable when this returns. Without `expires_at`, time-bound
        wording sets one ("until Friday": `memory.expiry`)."""
        now = self.clock()
        text = normalise_text(content, now)
        self._validate(text, kind, importance)
        if expires_at is None and self.config.expiry.from_wording and kind in self.config.expiry.kinds:
            found = expiry_from_wording(text, now)
            expires_at = found.at if found else None
            if found:
                log.info("archival_expiry", agent_id=self.agent_id, phrase=found.phrase, expires_at=found.at)
        record = MemoryRecord(
            agent_id=self.agent_id,
            user_id=self.user_id,
            text=text,
            kind=kind,
            importance=self.config.default_importance if importance is None else importance,
            tags=sorted({t.strip().lower() for t in tags or [] if t.strip()}),
            created_at=now,
            updated_at=now,
            source_message_ids=list(source_message_ids or []),
            expires_at=expires_at,
        )
        cache_rows: list[dict[str, Any]] = []  # the vector's cache row, written with the memory's row
        [vector] = await asyncio.to_thread(embed_for_write, self.embedder, [text], cache_rows)
        async with self._write_lock:  # two inserts of the same fact must not both miss each other
            neighbour = await asyncio.to_thread(self.reads.neighbour, text, vector, kind, now)
            decision = decide(text, neighbour, self.config)
            if decision.action == "duplicate":
                assert decision.neighbour is not None  # a duplicate of its neighbour (`decide`)
                return await asyncio.to_thread(self._refresh, decision.neighbour, record, vector, cache_rows)
            return await asyncio.to_thread(
                self._add, record, vector, decision.neighbour if decision.action == "supersede" else None, cache_rows
            )

    def _validate(self, text: str, kind: str, importance: float | None) -> None:
        if not text:
            raise ValueError("the memory is empty")
        if len(text) > self.config.max_memory_chars:
            raise ValueError(
                f"the memory has {len(text)} characters; the limit is {self.config.max_memory_chars}. "
                "Store the essentials, or split it into several memories."
            )
        if kind not in MEMORY_KINDS:
            raise ValueError(f"unknown kind '{kind}' (one of {', '.join(MEMORY_KINDS)})")
        if importance is not None and not 0 <= importance <= 1:
            raise ValueError("importance must be between 0 and 1")

    def _add(
        self,
        record: MemoryRecord,
        vector: np.ndarray,
        superseded: Hit | None,
        cache_rows: list[dict[str, Any]] | None = None,
        extra: dict[str, Any] | None = None,
    ) -> InsertResult:
        """Insert, in the ledger's order (row 'inserting', point, superseded point, row live), batched with the
        other agents' concurrent inserts (`memory.group_commit`); answered once the row is live. `extra` goes
        into the 'insert' version's detail."""
        old_id = superseded.record.id if superseded else None
        similarity = round(superseded.score, 4) if superseded else None
        [point] = self.store.owned([StoredPoint(record, vector, self.keyword_vectors([record])[0])])
        detail = {"tags": record.tags, "kind": record.kind, "importance": record.importance} | (extra or {})
        group_commit(self.store.backend).insert(
            PendingInsert(
                self.ledger,
                self.store,
                point,
                old_id,
                similarity,
                detail | ({"supersedes": old_id} if old_id else {}),
                cache_rows or [],
            )
        )
        crash_point("archival.insert.completed")
        action: Literal["superseded", "inserted"] = "superseded" if old_id else "inserted"
        log.info(
            f"archival_{'supersede' if old_id else 'insert'}",
            agent_id=self.agent_id,
            id=record.id,
            kind=record.kind,
            chars=len(record.text),
            replaced=old_id,
        )
        return InsertResult(
            action=action, id=record.id, text=record.text, kind=record.kind, other_id=old_id, similarity=similarity
        )

    def _refresh(
        self, copy: Hit, new: MemoryRecord, vector: np.ndarray, cache_rows: list[dict[str, Any]] | None = None
    ) -> InsertResult:
        """A near-copy was written again: row (new fields, token), point's payload, token cleared."""
        if cache_rows:
            with self.engine.begin() as conn:
                write_cache_rows(conn, cache_rows)
        old = copy.record
        token = new_token()
        fields = self.ledger.begin_refresh(old.id, new, token, copy.score)
        if fields is None:  # forgotten or superseded since the neighbour was found
            return self._add(new, vector, None)  # (its cache row was written above)
        crash_point("archival.refresh.pending")
        self.store.set_payload(old.id, fields)
        crash_point("archival.refresh.payload")
        self.ledger.settle([old.id], token)
        crash_point("archival.refresh.completed")
        log.info("archival_dedupe", agent_id=self.agent_id, id=old.id, similarity=round(copy.score, 4))
        return InsertResult(
            action="duplicate",
            id=old.id,
            text=old.text,
            kind=old.kind,
            other_id=old.id,
            similarity=round(copy.score, 4),
        )

    async def insert_event(self, record: MemoryRecord, detail: dict[str, Any] | None = None) -> InsertResult:
        """Store a memory of an event (an episode) as given: its id and dates kept, never deduped or superseding
        (an event does not repeat another, however alike). An id already stored (in any state) writes nothing and
        answers 'duplicate', so a record with an id derived from the event is stored once. `detail` goes into its
        'insert' version."""
        record = record.model_copy(
            update={"agent_id": self.agent_id, "text": normalise_text(record.text, record.created_at)}
        )
        self._validate(record.text, record.kind, record.importance)
        cache_rows: list[dict[str, Any]] = []
        [vector] = await asyncio.to_thread(embed_for_write, self.embedder, [record.text], cache_rows)
        async with self._write_lock:
            if await asyncio.to_thread(self.ledger.rows, [record.id]):
                return InsertResult(
                    action="duplicate", id=record.id, text=record.text, kind=record.kind, other_id=record.id
                )
            return await asyncio.to_thread(self._add, record, vector, None, cache_rows, detail)

    async def rewrite(self, memory_id: str, text: str, *, operation: str, detail: dict[str, Any]) -> bool:
        """Replace a live memory's text in place (same id; new vector and payload), recorded as an `operation`
        version with `detail` and the new text. The text is stored as given (NUL removed), so a caller's bound on
        its length holds. False when the memory is not live (forgotten or superseded): nothing changes."""
        text = without_nul(text).strip()
        self._validate(text, "fact", None)  # the text's checks (the kind stays what it was)
        cache_rows: list[dict[str, Any]] = []
        [vector] = await asyncio.to_thread(embed_for_write, self.embedder, [text], cache_rows)
        async with self._write_lock:  # an insert deduping against this memory waits for its new vector
            return await asyncio.to_thread(self.changes.rewrite, memory_id, text, vector, operation, detail, cache_rows)

    async def supersede(self, memory_id: str, by: str, detail: dict[str, Any]) -> bool:
        """Mark a live memory superseded by another existing one, `detail` (a reason, who decided) in its
        'superseded' version; SQL first, then the point (a crash between: `memory.reconcile` sets the point from
        the row). False when it is not live or already superseded (nothing changes: safe to repeat)."""
        return await self.changes.supersede(memory_id, by, detail)

    # -- search -----------------------------------------------------------------------------------------------

    async def search(
        self,
        query: str,
        *,
        tags: list[str] | None = None,
        start_date: datetime | None = None,
        end_date: datetime | None = None,
        top_k: int | None = None,
        page: int = 1,
        mode: Literal["hybrid", "bm25", "dense"] = "hybrid",
        count_hits: bool = True,
        seen: bool = False,
    ) -> list[ArchivalHit]:
        """Ranked live memories for a query: dense and BM25 candidates fused, weighed by recency, importance,
        usefulness and disuse; nothing below the noise floor. Expired and dormant memories only with a date range
        (`memory.decay`). `page` counts from 1, `top_k` results per page. `count_hits=False` leaves hit counts alone
        (benchmarks, inspection); `seen=True` with it marks the results used for decay, not for usefulness
        (prefetch: the model was shown them)."""
        k = max(1, min(top_k or self.config.top_k, self.config.max_top_k))
        dated = start_date is not None or end_date is not None
        if not self.reads.may_find(dated, lambda: self._stats_cache.may_find(dated)):
            return []  # nothing to find (checked against the database): no need to load the model or open the store
        now = self.clock()
        use = "hit" if count_hits else "seen" if seen and self.config.expiry.prefetch_counts else None
        limit = max(self.config.candidates, k * max(1, page) * 2)
        scope = (tags, start_date, end_date)

        def ranked_and_unmuted() -> tuple[list[ArchivalHit], int]:
            results, candidates = self.searcher.ranked_page(query, scope, limit, k, page, mode, now, use)
            return (self.mutes.drop(results) if self.mutes is not None else results), candidates

        # One thread hop for the whole search, muted topics included: on a busy host each hop can cost as much
        # as a query.
        results, candidates = await asyncio.to_thread(ranked_and_unmuted)
        log.info("archival_search", agent_id=self.agent_id, mode=mode, candidates=candidates, returned=len(results))
        return results

    # -- inspection, statistics, deletion ---------------------------------------------------------------------

    def stats(self) -> tuple[int, tuple[str, ...]]:
        """(live memories, tags in use by them) now, from SQL: whoever wrote them, whatever expired since.
        Costs one primary-key read while nothing changed (the agent's revision) and no memory expired; in a turn
        (`turn_stats`), one such read for the whole turn (`memory.stats_cache`)."""
        return self.reads.stats(self._stats_cache.value)

    def stored_stats(self) -> tuple[int, tuple[str, ...]]:
        """`stats` from this store, never through the agent's tape: what a trace header's snapshot notes (a read of
        no turn, which a replay is not served)."""
        return self._stats_cache.value()

    def turn_stats(self, revision: int | None = None) -> AbstractContextManager[None]:
        """For one turn (`with`): statistics as of its start plus its own writes, the revision read once (or
        `revision`, the agent's revision the turn read with its other checks, taken for the first read)."""
        return self._stats_cache.turn(revision)

    def list(self, include_superseded: bool = False) -> list[MemoryRecord]:
        """The agent's memories from SQL, newest first (no vector store needed)."""
        return self.ledger.list(include_superseded)

    def history(self, memory_id: str) -> builtins.list[MemoryVersion]:  # `list` here is the method above
        """Every recorded change of one of the agent's memories, oldest first."""
        return self.ledger.history(memory_id)

    def resolve_id(self, prefix: str) -> str | None:
        """The full id of the agent's memory whose id starts with `prefix` (unique), or None."""
        return self.ledger.resolve_id(prefix)

    async def pin(self, memory_id: str) -> bool:
        """Pin a live memory (tag `pinned`, no expiry): never decayed, expired or superseded by reflection. SQL
        first, then the point's payload; False when it is not live."""
        return await self.changes.pin(memory_id)

    async def forget(self, memory_id: str) -> bool:
        """Delete one memory for real, in the ledger's order: row marked, point deleted, row and history deleted."""
        return await self.changes.forget(memory_id)
