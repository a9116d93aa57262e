"""Recall memory: `conversation_search` over every stored message of an agent, evicted ones included.

Keyword search is the database's own full-text index (`memory.fulltext`: SQLite FTS5 with BM25; Postgres
`tsvector` with `ts_rank`), optionally fused with dense similarity (the configured embedder). Each message is indexed as
`[date] role: text` together with the message before it in the same session, since an answer is often a reply
to the question that names its subject. The indexes are brought up to date lazily, at search time, from the
`messages` table (`recall.indexes`; the table as recall reads it: `recall.rows`).

Ranking (defaults justified by bench/retrieval_locomo.py): BM25 over the keyed message (its own words count a
little extra) and dense similarity of the message alone and keyed, each divided by its best and mixed; then a
share of the next message's score is added, turns by a speaker the query names rise, and the head is re-ordered
for variety (`memory.recall_rank`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any, Literal

import numpy as np
import structlog
from sqlalchemy import select
from sqlalchemy.engine import Engine

from pagemind.runtime.memory.embedding.embedders import Embedder, query_vector
from pagemind.runtime.memory.reads import UNRECORDED, Codec, ReadTape
from pagemind.runtime.memory.recall.fulltext import FullText, IndexedMessage
from pagemind.runtime.memory.recall.indexes import RecallIndexes
from pagemind.runtime.memory.recall.rank import diversify, speaker_boost, with_next
from pagemind.runtime.memory.recall.rows import (
    COLUMNS,
    MESSAGES,
    indexed_message,
    passes_filters,
    read_rows,
    recall_hit,
    row_filters,
)
from pagemind.runtime.memory.retrieval.keywords import query_terms
from pagemind.runtime.memory.retrieval.ranking import beats_noise, fuse
from pagemind.runtime.memory.retrieval.rounds import refine, time_asked
from pagemind.runtime.memory.topics import MutedTopics
from pagemind.runtime.spec.memory import ArchivalConfig
from pagemind.runtime.state.records import utcnow
from pagemind.tools.context import RecallHit

log = structlog.get_logger("pagemind.recall")

Mode = Literal["hybrid", "bm25", "dense"]
_Read = dict[int, Any]  # messages rows a search read already, by id
_BATCH = 500  # rows a page reads at a time, at most
# A search is one read (`memory.reads`): a replay is served its hits, since the conversation log it ranks is not
# in the trace (archival memory, by contrast, is served the candidates and ranks them again).
_HITS: Codec[list[RecallHit]] = Codec(
    dump=lambda hits: [h.model_dump(mode="json") for h in hits],
    load=lambda data: [RecallHit.model_validate(h) for h in data],
)


class RecallService:
    """Recall memory of one agent (implements `tools.RecallMemory`): scoped to its agent id at construction."""

    def __init__(
        self,
        agent_id: int,
        *,
        engine: Engine,
        embedder: Embedder | None = None,
        config: ArchivalConfig | None = None,
        clock: Callable[[], datetime] | None = None,
        session_gap_hours: float = 6.0,
    ):
        self.agent_id = agent_id
        self.engine = engine
        self.embedder = embedder
        self.config = config or ArchivalConfig()
        self.session_gap_hours = session_gap_hours  # `memory.advanced.session_gap_hours`
        self.clock = clock or utcnow
        self.fulltext = FullText(engine)
        self.indexes = RecallIndexes(agent_id, engine, self.fulltext)  # brought up to date by `catch_up`
        self.tape: ReadTape = UNRECORDED  # the agent's, once loaded (`memory.reads`)
        self.mutes: MutedTopics | None = None  # hits touching a muted topic are left out (`memory.topics`)

    def reset_index(self) -> None:
        """Forget what this process indexed (messages were rewritten: a forget's tombstones); the next search
        indexes them again from SQL."""
        self.indexes.reset()

    def catch_up(self, dense: bool) -> None:
        """Index messages stored since the last search (full text always; dense vectors when used). One indexed
        read when nothing was stored since (the agent's newest message id is one the indexes covered)."""
        self.indexes.catch_up(
            dense,
            self.embedder,
            depth=self.config.recall_context_messages,
            gap=timedelta(hours=self.session_gap_hours),
        )

    # -- search -----------------------------------------------------------------------------------------------

    async def search(
        self,
        query: str | None = None,
        *,
        roles: list[str] | None = None,
        start_date: datetime | None = None,
        end_date: datetime | None = None,
        limit: int | None = None,
        page: int = 1,
        mode: Mode | None = None,
    ) -> list[RecallHit]:
        """Messages matching a query, best first, or the newest messages without one; roles and an inclusive
        date range narrow it, `limit` per page, `page` from 1."""
        limit = max(1, min(limit or self.config.top_k, self.config.max_top_k))
        page = max(1, page)
        query = query if query and query.strip() else None
        if query is not None:
            mode = mode or ("hybrid" if self.config.recall_dense and self.embedder is not None else "bm25")
        dates = [d.isoformat() if d else None for d in (start_date, end_date)]
        request = {"query": query, "roles": roles, "dates": dates, "limit": limit, "page": page, "mode": mode}

        def live() -> list[RecallHit]:
            if query is None:
                newest = self._newest(roles, start_date, end_date, limit, page)
                return self.mutes.drop(newest) if self.mutes is not None else newest
            assert mode is not None  # set with the query above
            hits, candidates = self._search(query, mode, roles, start_date, end_date, limit, page)
            log.info("recall_search", agent_id=self.agent_id, mode=mode, candidates=candidates, returned=len(hits))
            return self.mutes.drop(hits) if self.mutes is not None else hits

        return await asyncio.to_thread(self.tape.read, "recall", "search", request, live, _HITS)

    def _search(
        self,
        query: str,
        mode: Mode,
        roles: list[str] | None,
        start: datetime | None,
        end: datetime | None,
        limit: int,
        page: int,
    ) -> tuple[list[RecallHit], int]:
        """The blocking part of a search, in one worker thread (each hand-over to a thread costs a wait for a
        core on a busy host): the query's vector (in-process cache or model, never SQL: `query_vector`), the
        catch-up, the ranking, the page's rows. Returns the page and the number of candidates."""
        vector = None if mode == "bm25" else query_vector(self._dense_model(), query)
        self.catch_up(mode != "bm25")
        scored, read = self._ranked(query, vector, mode)
        return self._page(scored, read, roles, start, end, limit, page), len(scored)

    def _dense_model(self) -> Embedder:
        """The embedder, which a dense or hybrid search needs (`search` picks bm25 when there is none)."""
        if self.embedder is None:
            raise ValueError("recall memory has no embedder: a dense or hybrid search needs one")
        return self.embedder

    def _rank(self, query: str, vector: np.ndarray | None, mode: Mode) -> list[tuple[int, float]]:
        keyword = self.fulltext.search(self.agent_id, query_terms(query), self.config.recall_own_text_weight)
        if mode == "bm25":
            return sorted(((i, s) for i, s in keyword.items() if s > 0), key=lambda p: -p[1])
        index = self.indexes.dense
        if not index.ids:
            return []
        assert vector is not None  # not bm25: the query has a vector (`_search`)
        own, keyed = index.similarities(vector)
        kw = index.keyword_scores(keyword)
        dense = own + keyed
        fused = fuse(kw, dense, 1.0 if mode == "dense" else self.config.dense_weight)
        if mode == "hybrid":
            fused = with_next(fused, index.next_array, self.config.recall_next_weight)
        fused = speaker_boost(fused, index.speakers.named(query), self.config.recall_speaker_boost)
        similarity = np.maximum(own, keyed)
        keep = beats_noise(
            kw if mode == "hybrid" else np.zeros_like(kw),
            similarity,
            self.config.min_keyword_score,
            self.config.min_similarity,
        )
        return index.ranked(fused, keep)

    def _ranked(self, query: str, vector: np.ndarray | None, mode: Mode) -> tuple[list[tuple[int, float]], _Read]:
        """`_rank`, then the best `prefetch` results refined (a second round, the time boost: `memory.rounds`),
        then the head re-ordered for variety (dense modes: `recall_rank.diversify`). Also the rows the refining
        read, by id (the page takes its rows from them: read once)."""
        scored, read = self._refined(query, vector, mode)
        depth = self.config.recall_diversity_depth
        if mode == "bm25" or self.config.recall_diversity <= 0 or not scored:
            return scored, read
        head, index = scored[:depth], self.indexes.dense
        rows = np.searchsorted(index.id_array, [i for i, _ in head])
        assert index.own is not None  # a dense mode's results: the messages are indexed
        return diversify(head, index.own[rows], self.config.recall_diversity) + scored[depth:], read

    def _refined(self, query: str, vector: np.ndarray | None, mode: Mode) -> tuple[list[tuple[int, float]], _Read]:
        scored, c, now = self._rank(query, vector, mode), self.config, self.clock()
        read: _Read = {}
        asked = time_asked(query, now, c)
        if not (c.multihop.enabled or asked):
            return scored, read  # nothing to refine: no need to read the head's rows
        n = c.candidates

        def again(text: str) -> list[tuple[float, IndexedMessage]]:
            vector = None if mode == "bm25" else query_vector(self._dense_model(), text)
            return self._items(self._rank(text, vector, mode)[:n], read)

        head = refine(query, self._items(scored[:n], read), again, now, c, asked=asked)
        seen = {m.id for _, m in head}
        return [(m.id, s) for s, m in head] + [p for p in scored[n:] if p[0] not in seen], read

    def _items(self, scored: list[tuple[int, float]], read: _Read) -> list[tuple[float, IndexedMessage]]:
        """The scored messages as the rounds see them; their rows are added to `read`."""
        read.update((int(row.id), row) for row in self._by_id([i for i, _ in scored if i not in read]))
        return [(s, indexed_message(read[i])) for i, s in scored if i in read]

    def _page(
        self,
        scored: list[tuple[int, float]],
        read: _Read,
        roles: list[str] | None,
        start: datetime | None,
        end: datetime | None,
        limit: int,
        page: int,
    ) -> list[RecallHit]:
        """The page's hits, best first: rows in `read` (already read by the ranking) are filtered here, the others
        read with the filters in SQL, a chunk at a time."""
        wanted = (page - 1) * limit
        hits: list[RecallHit] = []
        offset, size = 0, max(2 * page * limit, 20)  # small first: without filters the first rows are the page
        while offset < len(scored):
            chunk = scored[offset : offset + size]
            offset, size = offset + size, min(_BATCH, size * 4)
            found = {i: read[i] for i, _ in chunk if i in read and passes_filters(read[i], roles, start, end)}
            found.update((int(r.id), r) for r in self._by_id([i for i, _ in chunk if i not in read], roles, start, end))
            for message_id, score in chunk:
                if message_id in found:
                    if wanted:
                        wanted -= 1
                        continue
                    hits.append(recall_hit(found[message_id]).model_copy(update={"score": round(score, 4)}))
                    if len(hits) == limit:
                        return hits
        return hits

    def _by_id(
        self, ids: list[int], roles: list[str] | None = None, start: datetime | None = None, end: datetime | None = None
    ) -> list[Any]:
        """The rows of the messages `ids` that pass the filters, in no order (none for no ids)."""
        if not ids:
            return []
        return read_rows(self.engine, select(*COLUMNS).where(row_filters(self.agent_id, roles, start, end, ids=ids)))

    def _newest(
        self, roles: list[str] | None, start: datetime | None, end: datetime | None, limit: int, page: int
    ) -> list[RecallHit]:
        """Newest first; messages with no text (e.g. send_message results) are skipped, not counted."""
        base = select(*COLUMNS).where(row_filters(self.agent_id, roles, start, end)).order_by(MESSAGES.c.id.desc())
        hits: list[RecallHit] = []
        skip, offset = (page - 1) * limit, 0
        while len(hits) < limit:
            rows = read_rows(self.engine, base.limit(_BATCH).offset(offset))
            if not rows:
                break
            offset += len(rows)
            for hit in (h for h in map(recall_hit, rows) if h.text):
                if skip:
                    skip -= 1
                elif len(hits) < limit:
                    hits.append(hit)
        return hits
