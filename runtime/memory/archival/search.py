"""Archival search's ranking for one agent: a query's candidates fused, weighed and paged, and the hits counted.

Dense and keyword candidates (through the agent's reads: `memory.archival.reads`, so a replay served them still
ranks here) are fused; in hybrid mode memories filed together lift each other (`filed_from`); each score is then
weighed by recency, importance, usefulness and disuse (`memory.decay`), and nothing below the noise floor is kept.
A second round and the time boost refine the head (`memory.rounds`). The results' hit counts (or, for a prefetch,
their last use) are then written, SQL first, then the payloads. The entry, `ArchivalService.search`, checks that
there is anything to find and hands this part to a worker thread.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol

import numpy as np

from pagemind.runtime.memory.archival.filed_from import filed_together
from pagemind.runtime.memory.archival.ledger import Ledger, new_token
from pagemind.runtime.memory.archival.reads import ArchivalReads
from pagemind.runtime.memory.embedding.embedders import Embedder, query_vector
from pagemind.runtime.memory.lifecycle.activity import Activity
from pagemind.runtime.memory.lifecycle.decay import disuse_weight, due_for_seen, search_filter
from pagemind.runtime.memory.retrieval.keywords import analysed
from pagemind.runtime.memory.retrieval.ranking import beats_noise, fuse, importance_factor, recency, usefulness
from pagemind.runtime.memory.retrieval.rounds import refine
from pagemind.runtime.memory.vectors.backend import AgentStore
from pagemind.runtime.memory.vectors.records import Hit, MemoryRecord, Sparse
from pagemind.runtime.process.crashpoints import crash_point
from pagemind.runtime.spec.memory import ArchivalConfig
from pagemind.tools.context import ArchivalHit

Scope = tuple[list[str] | None, datetime | None, datetime | None]  # a search's tags and inclusive date range


class SearchParts(Protocol):
    """What the search uses of the archival service (`memory.archival.memory.ArchivalService`)."""

    config: ArchivalConfig
    embedder: Embedder
    ledger: Ledger
    reads: ArchivalReads

    @property
    def store(self) -> AgentStore:
        """The agent's vector store, opened on first use."""

    def keyword_vector(self, text: str, query: bool = False) -> Sparse:
        """The keyword (sparse) vector of analysed terms."""


class ArchivalSearch:
    """One agent's archival search, below `ArchivalService.search`: blocking, run in one worker thread."""

    def __init__(self, service: SearchParts):
        self.service = service

    def ranked_page(
        self,
        query: str,
        scope: Scope,
        limit: int,
        k: int,
        page: int,
        mode: str,
        now: datetime,
        use: str | None,
    ) -> tuple[list[ArchivalHit], int]:
        """The `page`th `k` results (from 1) of up to `limit` candidates per retriever, in `scope`; and how many
        were ranked. `use`: 'hit' counts a hit on each result, 'seen' moves the last use of those due
        (`memory.decay`), None leaves them alone."""
        service, config = self.service, self.service.config
        activity = service.reads.activity(now)  # cached: a read only until today is known active
        tags, start_date, end_date = scope
        flt = search_filter(now, config.expiry, activity, tags=tags, start_date=start_date, end_date=end_date)

        def one_round(text: str) -> list[tuple[float, MemoryRecord]]:
            vector = query_vector(service.embedder, text)
            sparse = service.keyword_vector(analysed(text), query=True) if mode != "dense" else None
            dense_hits, keyword_hits = service.reads.candidates(
                text, mode, flt, limit, vector if mode != "bm25" else None, sparse
            )
            return self.rank(vector, dense_hits, keyword_hits, now, mode, activity)

        ranked = refine(query, one_round(query), one_round, now, config)  # a second round, the time boost
        shown = ranked[(max(1, page) - 1) * k : max(1, page) * k]
        results = [
            ArchivalHit(
                id=r.id,
                text=r.text,
                kind=r.kind,
                date=r.created_at,
                score=round(float(s), 4),
                tags=r.tags,
                importance=r.importance,
            )
            for s, r in shown
        ]
        if results and use == "hit":
            self.count_hits([r.id for r in results], now)
        elif use == "seen" and (due := due_for_seen([r for _, r in shown], now)):
            self.count_hits(due, now, count=False)
        return results, len(ranked)

    def rank(
        self,
        vector: np.ndarray,
        dense_hits: list[Hit],
        keyword_hits: list[Hit],
        now: datetime,
        mode: str,
        activity: Activity,
    ) -> list[tuple[float, MemoryRecord]]:
        """(score, record) of every candidate that beats noise, best first."""
        config = self.service.config
        records = {h.record.id: h.record for h in [*dense_hits, *keyword_hits]}
        if not records:
            return []
        ids = list(records)
        cos = {h.record.id: h.score for h in dense_hits}
        # keyword hits the dense side did not return: the store scored them (or their vectors are fetched)
        cos.update({h.record.id: h.cosine for h in keyword_hits if h.cosine is not None and h.record.id not in cos})
        missing = [i for i in ids if i not in cos]
        if missing and mode != "bm25":
            cos.update({i: float(v @ vector) for i, v in self.service.reads.vectors(missing).items()})
        kw = {h.record.id: h.score for h in keyword_hits}
        dense = np.array([cos.get(i, 0.0) for i in ids])
        keyword = np.array([kw.get(i, 0.0) for i in ids])
        weight = {"hybrid": config.dense_weight, "bm25": 0.0, "dense": 1.0}[mode]
        fused = fuse(keyword, dense, weight)
        if mode == "hybrid":
            fused = filed_together(
                fused, [records[i].created_at for i in ids], config.neighbour_seconds, config.neighbour_weight
            )
        keep = beats_noise(keyword, dense, config.min_keyword_score, config.min_similarity)
        scored = [(fused[n] * self._prior(records[i], now, activity), records[i]) for n, i in enumerate(ids) if keep[n]]
        scored.sort(key=lambda pair: -pair[0])
        return scored

    def _prior(self, record: MemoryRecord, now: datetime, activity: Activity) -> float:
        c = self.service.config
        return (
            recency(record.created_at, now, c.recency_weight, c.recency_half_life_days)
            * importance_factor(record.importance, c.importance_weight)
            * usefulness(record.hit_count, c.hit_boost, record.last_hit_at, now, c.recency_half_life_days)
            * disuse_weight(record, activity, c.expiry)
        )

    def count_hits(self, ids: list[str], now: datetime, count: bool = True) -> None:
        """Usefulness bookkeeping: each returned memory gets a hit, or (not `count`) only its last use moved to
        now (SQL first, then the payloads)."""
        ledger, token = self.service.ledger, new_token()
        fields = ledger.begin_hits(ids, now, token, count=count)
        crash_point("archival.hits.pending")
        # one store write per distinct set of values (they differ only by hit count): each write is a WAL append
        same: dict[tuple[tuple[str, Any], ...], list[str]] = {}
        for memory_id, values in fields.items():
            same.setdefault(tuple(sorted(values.items())), []).append(memory_id)
        for items, memory_ids in same.items():
            self.service.store.set_payloads(memory_ids, dict(items))
        crash_point("archival.hits.payload")
        ledger.settle(list(fields), token)
