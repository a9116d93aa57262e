"""Recall memory's indexes, brought up to date at search time: the database's full-text index (`recall.fulltext`)
and the dense vectors of the agent's messages, which this process holds (`DenseIndex`).

Both are caught up lazily from the `messages` table, so every path that stores messages (the loop, the pressure
monitor, imports) is covered. Each message is indexed with the message before it in the same session as context
(both indexes), and the ones before that, up to `recall_context_messages`, for keywords only.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

import numpy as np
import structlog
from sqlalchemy import func, select, union_all
from sqlalchemy.engine import Engine

from pagemind.runtime.memory.embedding.embedders import Embedder
from pagemind.runtime.memory.recall.fulltext import FullText, IndexedMessage
from pagemind.runtime.memory.recall.rank import Speakers
from pagemind.runtime.memory.recall.rows import COLUMNS, MESSAGES, indexed_message, read_rows

log = structlog.get_logger("pagemind.recall")

_BATCH = 500  # messages indexed, or embedded, at a time


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


class RecallIndexes:
    """One agent's recall indexes as this process knows them: the full-text index's coverage and the dense index."""

    def __init__(self, agent_id: int, engine: Engine, fulltext: FullText):
        self.agent_id = agent_id
        self.engine = engine
        self.fulltext = fulltext
        self.dense = DenseIndex()
        self._last: IndexedMessage | None = None  # the last indexed message (context for the next one)
        self._fulltext_covered = 0  # the newest message id the full-text index is known to have covered
        self._lock = threading.Lock()

    def reset(self) -> None:
        """Forget what this process indexed (messages were rewritten: a forget's tombstones); the next catch-up
        indexes them again from SQL."""
        with self._lock:
            self.dense, self._last, self._fulltext_covered = DenseIndex(), None, 0

    def catch_up(self, dense: bool, embedder: Embedder | None, *, depth: int, gap: timedelta) -> None:
        """Index messages stored since the last search (full text always; dense vectors when used and there is an
        `embedder`), each with up to `depth` messages before it no more than `gap` apart as context. One indexed
        read when nothing was stored since (the agent's newest message id is one the indexes covered)."""
        with self._lock:
            newest = self._newest_id()
            if newest > self._fulltext_covered:
                self._catch_up_fulltext(depth, gap)
                self._fulltext_covered = newest  # (a message stored meanwhile is above it: seen next time)
            if dense and embedder is not None and newest > self.dense.covered:
                self._catch_up_dense(embedder, depth, gap)
                self.dense.covered = newest

    def _load(self, after: int) -> list[IndexedMessage]:
        query = select(*COLUMNS).where(MESSAGES.c.agent_id == self.agent_id, MESSAGES.c.id > after)
        rows = read_rows(self.engine, query.order_by(MESSAGES.c.id))
        return [m for m in (indexed_message(row) for row in rows) if m.text]

    def _newest_id(self) -> int:
        # max(id) per (agent_id, in_context) is one index probe each (ix_messages_agent_context); over agent_id
        # alone it would read every index entry of the agent.
        c = MESSAGES.c
        parts = union_all(
            *(
                select(func.max(c.id).label("m")).where(c.agent_id == self.agent_id, c.in_context == flag)
                for flag in (False, True)
            )
        ).subquery()
        with self.engine.connect() as conn:
            return int(conn.execute(select(func.max(parts.c.m))).scalar() or 0)

    def _catch_up_fulltext(self, depth: int, gap: timedelta) -> None:
        mark = self.fulltext.watermark(self.agent_id)
        fresh = self._load(mark)
        if not fresh:
            return
        _with_context(fresh, self._load_before(fresh[0].id, depth), depth, gap)
        for start in range(0, len(fresh), _BATCH):
            chunk = fresh[start : start + _BATCH]
            self.fulltext.add(self.agent_id, chunk, chunk[-1].id)
        log.info("recall_indexed", agent_id=self.agent_id, messages=len(fresh))

    def _load_before(self, message_id: int, count: int) -> list[IndexedMessage]:
        """Up to `count` messages with text before `message_id`, oldest first (context for the first new one)."""
        if count <= 0:
            return []
        query = (
            select(*COLUMNS)
            .where(MESSAGES.c.agent_id == self.agent_id, MESSAGES.c.id < message_id)
            .order_by(MESSAGES.c.id.desc())
            .limit(10 * count)
        )
        before = [m for m in (indexed_message(row) for row in read_rows(self.engine, query)) if m.text]
        return before[:count][::-1]

    def _catch_up_dense(self, embedder: Embedder, depth: int, gap: timedelta) -> None:
        after = self.dense.ids[-1] if self.dense.ids else 0
        fresh = _with_context(self._load(after), [self._last] if self._last is not None else [], depth, gap)
        if not fresh:
            return
        own, keyed = self._embed_documents(embedder, fresh)
        index = self.dense
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


def _with_context(
    messages: list[IndexedMessage], before: list[IndexedMessage], depth: int, gap: timedelta
) -> list[IndexedMessage]:
    # The message just before is context for both indexes; the ones before it (up to `depth`) for keywords only.
    # `before`: the messages preceding the first one, oldest first.
    window = list(before)
    for message in messages:
        window = [p for p in window if message.created_at - p.created_at <= gap][-depth:] if depth else []
        if window:
            message.context = f"{window[-1].role}: {window[-1].text}"
            message.earlier = " ".join(f"{p.role}: {p.text}" for p in reversed(window[:-1]))
        window.append(message)
    return messages


def embedded_documents(conn: Any, agent_id: int) -> set[str]:
    """Every text the dense recall index may have embedded for the agent's messages (the embedding cache's keys
    are their hashes): each message's own document, and the same with the message before it as its context. A
    superset of what was embedded (whether that context applied depended on the session gap, which a purge need
    not know); erasure keeps an entry only another agent's texts could also have produced."""
    rows = conn.execute(select(*COLUMNS).where(MESSAGES.c.agent_id == agent_id).order_by(MESSAGES.c.id))
    texts: set[str] = set()
    before: IndexedMessage | None = None
    for message in (m for m in map(indexed_message, rows) if m.text):
        texts.add(message.own_document())
        if before is not None:
            message.context = f"{before.role}: {before.text}"
            texts.add(message.keyed_document())
        before = message
    return texts
