"""Archival memory for one agent: the write path (date, dedupe, supersede) and hybrid search.

    archival = ArchivalService(agent_id=record.id, engine=..., open_backend=..., embedder=..., config=...)
    result = await archival.insert("Lin started a new job today", tags=["work"])
    hits = await archival.search("where does Lin work?")

An agent's memories are keyed by its id (`agents.id`), in SQL and in the vector store alike, so renaming the
agent keeps them. Vectors and the payload used for filtered search live in Qdrant (`memory.stores`); SQL holds
the same metadata (`archival_memories`: cheap statistics and listings that work without opening the vector store)
and every change to a memory (`archival_memory_versions`), so nothing is overwritten without a trace.
`forget` deletes a memory from both, history included. The write path's decisions are `memory.write_policy`.
"""

from __future__ import annotations

import asyncio
import re
from datetime import datetime
from typing import Any, Callable, Literal

import numpy as np
import structlog
from pydantic import BaseModel
from sqlalchemy import delete, select, update
from sqlalchemy.engine import Engine

from pagemind.runtime.memory.backend import AgentStore, ArchivalBackend
from pagemind.runtime.memory.embeddings import Embedder, aembed
from pagemind.runtime.memory.keywords import analysed
from pagemind.runtime.memory.ranking import beats_noise, fuse, importance_factor, recency, usefulness
from pagemind.runtime.memory.records import Hit, MemoryFilter, MemoryRecord, Sparse, StoredPoint
from pagemind.runtime.memory.rekey import complete_rekeys
from pagemind.runtime.memory.write_policy import decide, keyword_document, normalise_text
from pagemind.runtime.memory_config import ArchivalConfig
from pagemind.runtime.state.records import aware, utcnow
from pagemind.runtime.state.tables import archival_memories as memories_table
from pagemind.runtime.state.tables import archival_memory_versions as versions_table
from pagemind.tools.context import MEMORY_KINDS, ArchivalHit, InsertResult

log = structlog.get_logger("pagemind.archival")


class MemoryVersion(BaseModel):
    """One entry of a memory's history."""

    memory_id: str
    operation: str
    text: str
    detail: dict[str, Any]
    at: datetime


class ArchivalService:
    """Archival memory of one agent (implements `tools.ArchivalMemory`). Scoped at construction: nothing a
    caller passes can reach another agent's memories."""

    def __init__(self, agent_id: int, *, engine: Engine, open_backend: Callable[[], ArchivalBackend],
                 embedder: Embedder, config: ArchivalConfig | None = None,
                 clock: Callable[[], datetime] = utcnow, user_id: str | None = None):
        self.agent_id = agent_id
        self.user_id = user_id
        self.engine = engine
        self.embedder = embedder
        self.config = config or ArchivalConfig()
        self.clock = clock
        self._open_backend = open_backend
        self._store: AgentStore | None = None
        self._write_lock = asyncio.Lock()
        self._stats: tuple[int, tuple[str, ...]] | None = None
        self._bm25: Any = None

    # -- plumbing ---------------------------------------------------------------------------------------------

    @property
    def store(self) -> AgentStore:
        """This agent's view of the vector store (opened on first use, its pending re-keying completed first)."""
        if self._store is None:
            backend = self._open_backend()
            complete_rekeys(self.engine, backend)
            self._store = AgentStore(backend, self.agent_id)
        return self._store

    def _sparse(self, text: str, query: bool = False) -> Sparse:
        if self._bm25 is None:
            from qdrant_edge import Bm25, Bm25Config

            self._bm25 = Bm25(Bm25Config(language="english", avg_len=24.0))
        vector = self._bm25.embed_query(text) if query else self._bm25.embed_document(text)
        return Sparse(list(vector.indices), list(vector.values))

    # -- write path -------------------------------------------------------------------------------------------

    async def insert(self, content: str, *, kind: str = "fact", tags: list[str] | None = None,
                     importance: float | None = None, source_message_ids: list[int] | None = None,
                     expires_at: datetime | None = None) -> InsertResult:
        """Store a memory: normalise and date it, then refresh a near-duplicate, supersede a contradicted
        memory, or insert it. Durable (vector store and SQL) when this returns."""
        now = self.clock()
        text = normalise_text(content, now)
        self._validate(text, kind, importance)
        record = MemoryRecord(
            agent_id=self.agent_id, user_id=self.user_id, text=text, kind=kind,
            importance=self.config.default_importance if importance is None else importance,
            tags=sorted({t.strip().lower() for t in tags or [] if t.strip()}), created_at=now, updated_at=now,
            source_message_ids=list(source_message_ids or []), expires_at=expires_at)
        [vector] = await aembed(self.embedder, [text])
        async with self._write_lock:  # two inserts of the same fact must not both miss each other
            neighbour = await asyncio.to_thread(self._nearest, vector, kind, now)
            decision = decide(text, neighbour, self.config)
            if decision.action == "duplicate":
                return await asyncio.to_thread(self._refresh, decision.neighbour, record)
            return await asyncio.to_thread(self._add, record, vector, decision.neighbour
                                           if decision.action == "supersede" else None)

    def _validate(self, text: str, kind: str, importance: float | None) -> None:
        if not text:
            raise ValueError("the memory is empty")
        if len(text) > self.config.max_memory_chars:
            raise ValueError(f"the memory has {len(text)} characters; the limit is {self.config.max_memory_chars}. "
                             "Store the essentials, or split it into several memories.")
        if kind not in MEMORY_KINDS:
            raise ValueError(f"unknown kind '{kind}' (one of {', '.join(MEMORY_KINDS)})")
        if importance is not None and not 0 <= importance <= 1:
            raise ValueError("importance must be between 0 and 1")

    def _nearest(self, vector: np.ndarray, kind: str, now: datetime) -> Hit | None:
        hits = self.store.search_dense(vector, MemoryFilter(kinds=[kind], live_at=now), 1)
        return hits[0] if hits else None

    def _add(self, record: MemoryRecord, vector: np.ndarray, superseded: Hit | None) -> InsertResult:
        self.store.upsert([StoredPoint(record, vector, self._sparse(keyword_document(record)))])
        with self.engine.begin() as conn:
            conn.execute(memories_table.insert(), [self._row(record)])
            self._version(conn, record.id, "insert", record.text, {"tags": record.tags, "kind": record.kind,
                                                                    "importance": record.importance}, record.created_at)
            if superseded is not None:
                self._mark_superseded(conn, superseded, record)
        if superseded is not None:
            self.store.set_payload(superseded.record.id, {"superseded_by": record.id, "updated_at": record.created_at})
        self._stats = None  # recomputed on next use: one indexed query, not one per step
        action = "superseded" if superseded else "inserted"
        log.info(f"archival_{'supersede' if superseded else 'insert'}", agent_id=self.agent_id, id=record.id,
                 kind=record.kind, chars=len(record.text), replaced=superseded.record.id if superseded else None)
        return InsertResult(action=action, id=record.id, text=record.text, kind=record.kind,
                            other_id=superseded.record.id if superseded else None,
                            similarity=round(superseded.score, 4) if superseded else None)

    def _mark_superseded(self, conn: Any, old: Hit, new: MemoryRecord) -> None:
        conn.execute(update(memories_table).where(memories_table.c.id == old.record.id,
                                                  memories_table.c.agent_id == self.agent_id)
                     .values(superseded_by=new.id, updated_at=new.created_at))
        self._version(conn, old.record.id, "superseded", old.record.text,
                      {"superseded_by": new.id, "new_text": new.text, "similarity": round(old.score, 4)},
                      new.created_at)

    def _refresh(self, copy: Hit, new: MemoryRecord) -> InsertResult:
        old = copy.record
        fields = {"updated_at": new.created_at, "hit_count": old.hit_count + 1, "last_hit_at": new.created_at,
                  "tags": sorted(set(old.tags) | set(new.tags)), "importance": max(old.importance, new.importance),
                  "source_message_ids": sorted(set(old.source_message_ids) | set(new.source_message_ids))}
        self.store.set_payload(old.id, fields)
        with self.engine.begin() as conn:
            conn.execute(update(memories_table).where(memories_table.c.id == old.id,
                                                      memories_table.c.agent_id == self.agent_id).values(**fields))
            self._version(conn, old.id, "refresh", old.text,
                          {"duplicate_text": new.text, "similarity": round(copy.score, 4), "tags": fields["tags"]},
                          new.created_at)
        self._stats = None
        log.info("archival_dedupe", agent_id=self.agent_id, id=old.id, similarity=round(copy.score, 4))
        return InsertResult(action="duplicate", id=old.id, text=old.text, kind=old.kind, other_id=old.id,
                            similarity=round(copy.score, 4))

    def _row(self, record: MemoryRecord) -> dict[str, Any]:
        return record.model_dump()

    def _version(self, conn: Any, memory_id: str, operation: str, text: str, detail: dict[str, Any],
                 at: datetime) -> None:
        conn.execute(versions_table.insert(), [{"agent_id": self.agent_id, "memory_id": memory_id,
                                                "operation": operation, "text": text, "detail": detail, "at": at}])

    # -- search -----------------------------------------------------------------------------------------------

    async def search(self, query: str, *, tags: list[str] | None = None, start_date: datetime | None = None,
                     end_date: datetime | None = None, top_k: int | None = None, page: int = 1,
                     mode: Literal["hybrid", "bm25", "dense"] = "hybrid", count_hits: bool = True) -> list[ArchivalHit]:
        """Ranked live memories for a query: dense and BM25 candidates fused, weighed by recency, importance
        and usefulness; nothing below the noise floor. `page` counts from 1, `top_k` results per page.
        `count_hits=False` leaves hit counts alone (benchmarks, inspection)."""
        k = max(1, min(top_k or self.config.top_k, self.config.max_top_k))
        if self.stats()[0] == 0:
            return []  # nothing live (cached count): no need to load the model or open the vector store
        now = self.clock()
        flt = MemoryFilter(tags=[t.lower() for t in tags] if tags else None, created_from=start_date,
                           created_to=end_date, live_at=now)
        limit = max(self.config.prefetch, k * max(1, page) * 2)
        [vector] = await aembed(self.embedder, [query])
        sparse = self._sparse(analysed(query), query=True)
        dense_hits, keyword_hits = await asyncio.gather(
            asyncio.to_thread(self.store.search_dense, vector, flt, limit) if mode != "bm25" else _nothing(),
            asyncio.to_thread(self.store.search_sparse, sparse, flt, limit) if mode != "dense" else _nothing())
        ranked = await asyncio.to_thread(self._rank, vector, dense_hits, keyword_hits, now, mode)
        results = ranked[(max(1, page) - 1) * k: max(1, page) * k]
        if results and count_hits:
            await asyncio.to_thread(self._count_hits, [r.id for r in results], now)
        log.info("archival_search", agent_id=self.agent_id, mode=mode, candidates=len(ranked), returned=len(results),
                 page=page)
        return results

    def _rank(self, vector: np.ndarray, dense_hits: list[Hit], keyword_hits: list[Hit], now: datetime,
              mode: str) -> list[ArchivalHit]:
        records = {h.record.id: h.record for h in [*dense_hits, *keyword_hits]}
        if not records:
            return []
        ids = list(records)
        cos = {h.record.id: h.score for h in dense_hits}
        missing = [i for i in ids if i not in cos]
        if missing and mode != "bm25":
            cos.update({i: float(v @ vector) for i, v in self.store.dense_vectors(missing).items()})
        kw = {h.record.id: h.score for h in keyword_hits}
        dense = np.array([cos.get(i, 0.0) for i in ids])
        keyword = np.array([kw.get(i, 0.0) for i in ids])
        weight = {"hybrid": self.config.dense_weight, "bm25": 0.0, "dense": 1.0}[mode]
        fused = fuse(keyword, dense, weight)
        keep = beats_noise(keyword, dense, self.config.min_keyword_score, self.config.min_similarity)
        scored = [(fused[n] * self._prior(records[i], now), records[i]) for n, i in enumerate(ids) if keep[n]]
        scored.sort(key=lambda pair: -pair[0])
        return [ArchivalHit(id=r.id, text=r.text, kind=r.kind, date=r.created_at, score=round(float(s), 4),
                            tags=r.tags, importance=r.importance) for s, r in scored]

    def _prior(self, record: MemoryRecord, now: datetime) -> float:
        c = self.config
        return (recency(record.created_at, now, c.recency_weight, c.recency_half_life_days)
                * importance_factor(record.importance, c.importance_weight)
                * usefulness(record.hit_count, c.hit_boost, record.last_hit_at, now, c.recency_half_life_days))

    def _count_hits(self, ids: list[str], now: datetime) -> None:
        """Usefulness bookkeeping: each returned memory gets a hit (vector store payload and SQL)."""
        for record in self.store.get(ids):
            self.store.set_payload(record.id, {"hit_count": record.hit_count + 1, "last_hit_at": now})
        with self.engine.begin() as conn:
            conn.execute(update(memories_table).where(memories_table.c.id.in_(ids),
                                                      memories_table.c.agent_id == self.agent_id)
                         .values(hit_count=memories_table.c.hit_count + 1, last_hit_at=now))

    # -- inspection, statistics, deletion ---------------------------------------------------------------------

    def stats(self) -> tuple[int, tuple[str, ...]]:
        """(live memories, tags in use by them), from SQL, cached and kept current by this service's writes."""
        if self._stats is None:
            now = self.clock()
            with self.engine.connect() as conn:
                rows = conn.execute(select(memories_table.c.tags, memories_table.c.expires_at).where(
                    memories_table.c.agent_id == self.agent_id, memories_table.c.superseded_by.is_(None))).all()
            live = [tags for tags, expires in rows if expires is None or aware(expires) > now]
            self._stats = (len(live), tuple(sorted({t for tags in live for t in tags or []})))
        return self._stats

    def list(self, include_superseded: bool = False) -> list[MemoryRecord]:
        """The agent's memories from SQL, newest first (no vector store needed)."""
        query = select(memories_table).where(memories_table.c.agent_id == self.agent_id)
        if not include_superseded:
            query = query.where(memories_table.c.superseded_by.is_(None))
        with self.engine.connect() as conn:
            rows = conn.execute(query.order_by(memories_table.c.created_at.desc())).mappings().all()
        return [_record(row) for row in rows]

    def history(self, memory_id: str) -> list[MemoryVersion]:
        """Every recorded change of one of the agent's memories, oldest first."""
        with self.engine.connect() as conn:
            rows = conn.execute(select(versions_table).where(
                versions_table.c.agent_id == self.agent_id, versions_table.c.memory_id == memory_id)
                .order_by(versions_table.c.id)).mappings().all()
        return [MemoryVersion(memory_id=r["memory_id"], operation=r["operation"], text=r["text"],
                              detail=r["detail"] or {}, at=aware(r["at"])) for r in rows]

    def resolve_id(self, prefix: str) -> str | None:
        """The full id of the agent's memory whose id starts with `prefix` (unique), or None."""
        if not re.fullmatch(r"[0-9a-fA-F-]+", prefix or ""):
            return None  # ids are hex: anything else (an empty string, LIKE wildcards) names nothing
        with self.engine.connect() as conn:
            ids = conn.execute(select(memories_table.c.id).where(
                memories_table.c.agent_id == self.agent_id, memories_table.c.id.like(f"{prefix.lower()}%"))).scalars().all()
        return ids[0] if len(ids) == 1 else None

    async def forget(self, memory_id: str) -> bool:
        """Delete one memory for real: its point in the vector store, its SQL row and its history."""
        await asyncio.to_thread(self.store.delete, [memory_id])
        with self.engine.begin() as conn:
            deleted = conn.execute(delete(memories_table).where(memories_table.c.id == memory_id,
                                                                memories_table.c.agent_id == self.agent_id)).rowcount
            conn.execute(delete(versions_table).where(versions_table.c.memory_id == memory_id,
                                                      versions_table.c.agent_id == self.agent_id))
        self._stats = None
        log.info("archival_forget", agent_id=self.agent_id, id=memory_id, found=bool(deleted))
        return bool(deleted)


async def _nothing() -> list[Hit]:
    return []


def _record(row: Any) -> MemoryRecord:
    data = dict(row)
    for key in ("created_at", "updated_at", "last_hit_at", "expires_at"):
        if data[key] is not None:
            data[key] = aware(data[key])
    return MemoryRecord(**data)
