"""Recall memory: `conversation_search` over every stored message of an agent, evicted ones included.

Keyword search is the database's own full-text index (`memory.fulltext`: SQLite FTS5 with BM25; Postgres
`tsvector` with `ts_rank`), optionally fused with dense similarity (the configured embedder). Each message is indexed as
`[date] role: text` together with the message before it in the same session, since an answer is often a reply
to the question that names its subject. The index is brought up to date lazily, at search time, from the
`messages` table, so every path that stores messages (the loop, the pressure monitor, imports) is covered.

Ranking (defaults justified by bench/retrieval_locomo.py): BM25 over the keyed message (its own words count a
little extra) and dense similarity of the message alone and keyed, each divided by its best and mixed; then a
share of the next message's score is added, turns by a speaker the query names rise, and the head is re-ordered
for variety (`memory.recall_rank`).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import numpy as np
import structlog
from sqlalchemy import and_, func, select, union_all
from sqlalchemy.engine import Engine

from pagemind.runtime.memory.embedding.embedders import Embedder, query_vector
from pagemind.runtime.memory.reads import UNRECORDED, Codec, ReadTape
from pagemind.runtime.memory.recall.fulltext import INDEX_CHARS, FullText, IndexedMessage
from pagemind.runtime.memory.recall.rank import Speakers, diversify, speaker_boost, with_next
from pagemind.runtime.memory.retrieval.keywords import query_terms
from pagemind.runtime.memory.retrieval.ranking import beats_noise, fuse
from pagemind.runtime.memory.retrieval.rounds import refine, time_asked
from pagemind.runtime.memory.topics import MutedTopics
from pagemind.runtime.spec.memory import ArchivalConfig
from pagemind.runtime.state.records import utcnow
from pagemind.runtime.state.tables.conversation import MessageRow
from pagemind.runtime.state.tables.schema import table_of
from pagemind.tools.context import RecallHit

log = structlog.get_logger("pagemind.recall")

Mode = Literal["hybrid", "bm25", "dense"]
_Read = dict[int, Any]  # messages rows a search read already, by id
_BATCH = 500
# A search is one read (`memory.reads`): a replay is served its hits, since the conversation log it ranks is not
# in the trace (archival memory, by contrast, is served the candidates and ranks them again).
_HITS: Codec[list[RecallHit]] = Codec(
    dump=lambda hits: [h.model_dump(mode="json") for h in hits],
    load=lambda data: [RecallHit.model_validate(h) for h in data],
)
_MESSAGES = table_of(MessageRow)
_COLUMNS = (
    _MESSAGES.c.id,
    _MESSAGES.c.role,
    _MESSAGES.c.content,
    _MESSAGES.c.tool_calls,
    _MESSAGES.c.name,
    _MESSAGES.c.created_at,
)


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def searchable_text(role: str, content: str | None, tool_calls: Any, name: str | None) -> str:
    """What a stored message says, as recall searches it: user and assistant text, the replies sent with
    `send_message`, other tool calls and tool results (a send_message result repeats the reply: skipped)."""
    if role == "system" or (role == "tool" and name == "send_message"):
        return ""
    parts = [content or ""]
    for call in tool_calls or []:
        if call.get("name") == "send_message":
            parts.append(_send_message_text(call.get("arguments") or ""))
        else:
            parts.append(f"{call.get('name')}({call.get('arguments')})")
    return " ".join(p for p in parts if p).strip()


def _send_message_text(arguments: str) -> str:
    try:
        value = json.loads(arguments)
        return str(value.get("message", "")) if isinstance(value, dict) else str(value)
    except (json.JSONDecodeError, TypeError):
        return arguments


class _Fast:
    """The dense index's hot loops over every message, in numpy (methods of `DenseIndex`)."""

    ids: list[int]
    id_array: np.ndarray
    own: np.ndarray | None
    keyed: np.ndarray | None

    def similarities(self, vector: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Cosine of the query with each message alone and keyed. einsum, not `@`: a matrix-vector product goes
        to OpenBLAS, which splits it over threads that, on a busy 2-core host, wait for cores (≈ 13 ms wall for
        10,000 × 384 instead of < 1 ms)."""
        assert self.own is not None and self.keyed is not None  # searched only with messages indexed
        vector = np.asarray(vector, dtype=self.own.dtype)
        return np.einsum("ij,j->i", self.own, vector), np.einsum("ij,j->i", self.keyed, vector)

    def keyword_scores(self, keyword: dict[int, float]) -> np.ndarray:
        """The keyword scores as a vector over `ids` (0 for a message without any)."""
        scores = np.zeros(len(self.ids))
        if keyword and self.ids:
            found = np.fromiter(keyword.keys(), dtype=np.int64, count=len(keyword))
            at = np.minimum(np.searchsorted(self.id_array, found), len(self.ids) - 1)
            known = self.id_array[at] == found
            scores[at[known]] = np.fromiter(keyword.values(), dtype=float, count=len(keyword))[known]
        return scores

    def ranked(self, fused: np.ndarray, keep: np.ndarray) -> list[tuple[int, float]]:
        """(id, score) of the kept messages, best first (ties in id order)."""
        order = np.argsort(-fused, kind="stable")
        order = order[keep[order]]
        return list(zip(self.id_array[order].tolist(), fused[order].tolist(), strict=True))


@dataclass
class DenseIndex(_Fast):
    """Dense vectors of one agent's indexed messages, in id order, kept in process."""

    ids: list[int] = field(default_factory=list)
    id_array: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # `ids`, for numpy
    covered: int = 0  # the newest message id (with text or not) the index has looked at
    own: np.ndarray | None = None
    keyed: np.ndarray | None = None
    next_index: list[int] = field(default_factory=list)  # position of the next message in the session, or -1
    speakers: Speakers = field(default_factory=Speakers)  # each message's speaker label ("Caroline: …")
    next_array: np.ndarray = field(default_factory=lambda: np.zeros(0, dtype=np.int64))  # `next_index`, for numpy


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
        self._dense = DenseIndex()
        self._last: IndexedMessage | None = None  # the last indexed message (context for the next one)
        self._fulltext_covered = 0  # the newest message id the full-text index is known to have covered
        self._lock = threading.Lock()
        self.tape: ReadTape = UNRECORDED  # the agent's, once loaded (`memory.reads`)
        self.mutes: MutedTopics | None = None  # hits touching a muted topic are left out (`memory.topics`)

    def reset_index(self) -> None:
        """Forget what this process indexed (messages were rewritten: a forget's tombstones); the next search
        indexes them again from SQL."""
        with self._lock:
            self._dense, self._last, self._fulltext_covered = DenseIndex(), None, 0

    # -- indexing ---------------------------------------------------------------------------------------------

    def _load(self, after: int) -> list[IndexedMessage]:
        query = select(*_COLUMNS).where(_MESSAGES.c.agent_id == self.agent_id, _MESSAGES.c.id > after)
        return [m for m in (_indexed(row) for row in self._rows(query.order_by(_MESSAGES.c.id))) if m.text]

    def _rows(self, query: Any) -> list[Any]:
        with self.engine.connect() as conn:
            return list(conn.execute(query).all())

    def _with_context(self, messages: list[IndexedMessage], before: list[IndexedMessage]) -> list[IndexedMessage]:
        # The message just before is context for both indexes; the ones before it (`recall_context_messages`) for
        # keywords only. `before`: the messages preceding the first one, oldest first.
        gap = timedelta(hours=self.session_gap_hours)
        depth = self.config.recall_context_messages
        window = list(before)
        for message in messages:
            window = [p for p in window if message.created_at - p.created_at <= gap][-depth:] if depth else []
            if window:
                message.context = f"{window[-1].role}: {window[-1].text}"
                message.earlier = " ".join(f"{p.role}: {p.text}" for p in reversed(window[:-1]))
            window.append(message)
        return messages

    def catch_up(self, dense: bool) -> None:
        """Index messages stored since the last search (full text always; dense vectors when used). One indexed
        read when nothing was stored since (the agent's newest message id is one the indexes covered)."""
        with self._lock:
            newest = self._newest_id()
            if newest > self._fulltext_covered:
                self._catch_up_fulltext()
                self._fulltext_covered = newest  # (a message stored meanwhile is above it: seen next time)
            if dense and (embedder := self.embedder) is not None and newest > self._dense.covered:
                self._catch_up_dense(embedder)
                self._dense.covered = newest

    def _newest_id(self) -> int:
        # max(id) per (agent_id, in_context) is one index probe each (ix_messages_agent_context); over agent_id
        # alone it would read every index entry of the agent.
        c = _MESSAGES.c
        parts = union_all(
            *(
                select(func.max(c.id).label("m")).where(c.agent_id == self.agent_id, c.in_context == flag)
                for flag in (False, True)
            )
        ).subquery()
        with self.engine.connect() as conn:
            return int(conn.execute(select(func.max(parts.c.m))).scalar() or 0)

    def _catch_up_fulltext(self) -> None:
        mark = self.fulltext.watermark(self.agent_id)
        fresh = self._load(mark)
        if not fresh:
            return
        self._with_context(fresh, self._load_before(fresh[0].id, self.config.recall_context_messages))
        for start in range(0, len(fresh), _BATCH):
            chunk = fresh[start : start + _BATCH]
            self.fulltext.add(self.agent_id, chunk, chunk[-1].id)
        log.info("recall_indexed", agent_id=self.agent_id, messages=len(fresh))

    def _load_before(self, message_id: int, count: int) -> list[IndexedMessage]:
        """Up to `count` messages with text before `message_id`, oldest first (context for the first new one)."""
        if count <= 0:
            return []
        query = (
            select(*_COLUMNS)
            .where(_MESSAGES.c.agent_id == self.agent_id, _MESSAGES.c.id < message_id)
            .order_by(_MESSAGES.c.id.desc())
            .limit(10 * count)
        )
        before = [m for m in (_indexed(row) for row in self._rows(query)) if m.text]
        return before[:count][::-1]

    def _catch_up_dense(self, embedder: Embedder) -> None:
        after = self._dense.ids[-1] if self._dense.ids else 0
        fresh = self._with_context(self._load(after), [self._last] if self._last is not None else [])
        if not fresh:
            return
        own, keyed = self._embed_documents(embedder, fresh)
        index = self._dense
        base = len(index.ids)
        if index.next_index and self._last is not None and fresh[0].context:
            index.next_index[-1] = base
        index.ids += [m.id for m in fresh]
        index.next_index += [
            base + n + 1 if n + 1 < len(fresh) and fresh[n + 1].context else -1 for n in range(len(fresh))
        ]
        index.speakers.add([m.text for m in fresh])
        index.own = own if index.own is None else np.vstack([index.own, own])
        index.keyed = keyed if index.keyed is None else np.vstack([index.keyed, keyed])
        self._last = fresh[-1]
        index.id_array = np.asarray(index.ids, dtype=np.int64)
        index.next_array = np.asarray(index.next_index, dtype=np.int64)

    def _embed_documents(self, embedder: Embedder, fresh: list[IndexedMessage]) -> tuple[np.ndarray, np.ndarray]:
        """Vectors of the messages alone and keyed, `_BATCH` messages at a time: a process's first search reads
        them all from the SQL cache, but after an embedding-model change the model computes every one (minutes at
        10,000 messages), so a long catch-up reports its progress."""
        parts, computed = [], getattr(embedder, "computed", 0)
        for start in range(0, len(fresh), _BATCH):
            chunk = fresh[start : start + _BATCH]
            parts.append(
                (
                    embedder.embed([m.own_document() for m in chunk]),
                    embedder.embed([m.keyed_document() for m in chunk]),
                )
            )
            if len(fresh) > _BATCH:
                log.info("recall_embedding_progress", agent_id=self.agent_id, done=start + len(chunk), total=len(fresh))
        embedded = getattr(embedder, "computed", 0) - computed
        if embedded > _BATCH:  # not from the cache: a new model (or a new cache) re-embedded the conversation
            log.warning(
                "recall_reembedded",
                agent_id=self.agent_id,
                model=embedder.model_id,
                messages=len(fresh),
                texts=embedded,
            )
        return np.vstack([p[0] for p in parts]), np.vstack([p[1] for p in parts])

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
        index = self._dense
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
        head = scored[:depth]
        rows = np.searchsorted(self._dense.id_array, [i for i, _ in head])
        assert self._dense.own is not None  # a dense mode's results: the messages are indexed
        return diversify(head, self._dense.own[rows], self.config.recall_diversity) + scored[depth:], read

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
        return [(s, _indexed(read[i])) for i, s in scored if i in read]

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
            found = {i: read[i] for i, _ in chunk if i in read and _passes(read[i], roles, start, end)}
            found.update((int(r.id), r) for r in self._by_id([i for i, _ in chunk if i not in read], roles, start, end))
            for message_id, score in chunk:
                if message_id in found:
                    if wanted:
                        wanted -= 1
                        continue
                    hits.append(_hit(found[message_id]).model_copy(update={"score": round(score, 4)}))
                    if len(hits) == limit:
                        return hits
        return hits

    def _by_id(
        self, ids: list[int], roles: list[str] | None = None, start: datetime | None = None, end: datetime | None = None
    ) -> list[Any]:
        """The rows of the messages `ids` that pass the filters, in no order (none for no ids)."""
        return self._rows(select(*_COLUMNS).where(_filters(self.agent_id, roles, start, end, ids=ids))) if ids else []

    def _newest(
        self, roles: list[str] | None, start: datetime | None, end: datetime | None, limit: int, page: int
    ) -> list[RecallHit]:
        """Newest first; messages with no text (e.g. send_message results) are skipped, not counted."""
        base = select(*_COLUMNS).where(_filters(self.agent_id, roles, start, end)).order_by(_MESSAGES.c.id.desc())
        hits: list[RecallHit] = []
        skip, offset = (page - 1) * limit, 0
        while len(hits) < limit:
            rows = self._rows(base.limit(_BATCH).offset(offset))
            if not rows:
                break
            offset += len(rows)
            for hit in (h for h in map(_hit, rows) if h.text):
                if skip:
                    skip -= 1
                elif len(hits) < limit:
                    hits.append(hit)
        return hits


def _indexed(row: Any) -> IndexedMessage:
    # Only the beginning of a huge message is indexed (see memory.fulltext); the hit still shows all of it.
    return IndexedMessage(
        int(row.id),
        row.role,
        _aware(row.created_at),
        searchable_text(row.role, row.content, row.tool_calls, row.name)[:INDEX_CHARS],
    )


def _hit(row: Any) -> RecallHit:
    return RecallHit(
        id=int(row.id),
        role=row.role,
        time=_aware(row.created_at),
        text=searchable_text(row.role, row.content, row.tool_calls, row.name),
    )


def _filters(
    agent_id: int, roles: list[str] | None, start: datetime | None, end: datetime | None, ids: list[int] | None = None
) -> Any:
    clauses = [_MESSAGES.c.agent_id == agent_id]
    if ids is not None:
        # By primary key: `agent_id + 0` is no indexed column, so the planner cannot pick the agent's index (SQLite
        # did, and read all of the agent's entries: ~0.9 ms instead of ~0.02 ms for 20 ids at 10,000 messages).
        clauses = [(_MESSAGES.c.agent_id + 0) == agent_id, _MESSAGES.c.id.in_(ids)]
    if roles:
        clauses.append(_MESSAGES.c.role.in_(list(roles)))
    if start is not None:
        clauses.append(_MESSAGES.c.created_at >= _utc(start))
    if end is not None:
        clauses.append(_MESSAGES.c.created_at <= _utc(end))
    return and_(*clauses)


def _passes(row: Any, roles: list[str] | None, start: datetime | None, end: datetime | None) -> bool:
    """Whether a row read already passes the filters `_filters` puts in SQL (roles, the inclusive date range)."""
    at = _aware(row.created_at)
    return (not roles or row.role in roles) and not (start and at < _utc(start)) and not (end and at > _utc(end))


def _utc(value: datetime) -> datetime:
    # The messages table's datetime type wants aware values; naive ones are taken as UTC.
    return value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)


def embedded_documents(conn: Any, agent_id: int) -> set[str]:
    """Every text the dense recall index may have embedded for the agent's messages (the embedding cache's keys
    are their hashes): each message's own document, and the same with the message before it as its context. A
    superset of what was embedded (whether that context applied depended on the session gap, which a purge need
    not know); erasure keeps an entry only another agent's texts could also have produced."""
    rows = conn.execute(select(*_COLUMNS).where(_MESSAGES.c.agent_id == agent_id).order_by(_MESSAGES.c.id))
    texts: set[str] = set()
    before: IndexedMessage | None = None
    for message in (m for m in map(_indexed, rows) if m.text):
        texts.add(message.own_document())
        if before is not None:
            message.context = f"{before.role}: {before.text}"
            texts.add(message.keyed_document())
        before = message
    return texts
