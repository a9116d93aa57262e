"""The embedding cache: `CachedEmbedder` keys every vector by model and text hash, in process (an LRU) and in the
`embedding_cache` table, so the same text is never embedded twice, across restarts and processes.

With encryption at rest on, a text's key is its HMAC under the database's index key (`text_hash`). An archival
write defers its new cache rows to its own transaction (`embed_for_write`, `write_cache_rows`).
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from sqlalchemy import select
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError

from pagemind.runtime.crypto.cipher import TextCipher
from pagemind.runtime.crypto.columns import cipher_of
from pagemind.runtime.memory.embedding.embedders import Embedder, batched
from pagemind.runtime.state.dialects import dialect
from pagemind.runtime.state.tables.memory import embedding_cache as embedding_cache_table


def text_hash(text: str, cipher: TextCipher | None = None) -> str:
    """The cache key of a text: its sha256 (hex); with encryption at rest on (`cipher`, the engine's), its HMAC
    under the database's index key, so the cache holds nothing a guess of the text could be checked against."""
    if cipher is not None:
        return cipher.text_key(text)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class CachedEmbedder:
    """Wraps an embedder: a vector per (model, text hash) is computed once, kept in an LRU and, when given an
    engine (opened by `make_engine`, so the table exists), in the `embedding_cache` table, so it survives restarts
    and is shared by processes."""

    def __init__(self, inner: Embedder, engine: Engine | None = None, *, lru_size: int = 20_000):
        self.inner = inner
        self.model_id = inner.model_id
        self.engine = engine
        self.lru_size = lru_size
        self._lru: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self.computed = 0  # texts actually embedded by the model (tests and benchmarks read it)

    @property
    def dim(self) -> int:
        """The wrapped model's vector size."""
        return self.inner.dim

    def embed(self, texts: Sequence[str], *, defer: list[dict[str, Any]] | None = None) -> np.ndarray:
        """Vectors for texts: from the LRU, then SQL, and only the misses from the model (deduplicated). With
        `defer`, the new cache rows are appended there for the caller to write in a transaction of its own
        (`write_cache_rows`: an archival insert writes them with its row) instead of in one of their own."""
        cipher = cipher_of(self.engine) if self.engine is not None else None
        keys = [text_hash(t, cipher) for t in texts]
        found = self._from_lru(keys)
        missing = [k for k in dict.fromkeys(keys) if k not in found]
        if missing and self.engine is not None:
            found.update(self._from_sql(missing))
        todo = {k: t for k, t in zip(keys, texts, strict=True) if k not in found}
        if todo:
            fresh = self.inner.embed(list(todo.values()))
            self.computed += len(todo)
            computed = dict(zip(todo, fresh, strict=True))
            found.update(computed)
            if self.engine is not None and defer is not None:
                defer += self._rows(computed)
            elif self.engine is not None:
                self._to_sql(computed)
        self._remember(found)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.vstack([found[k] for k in keys]).astype(np.float32)

    @property
    def thresholds(self) -> Mapping[str, float]:
        """The wrapped model's own ArchivalConfig thresholds (`model_profiles`); none for an endpoint's model."""
        profile = getattr(self.inner, "profile", None)
        return profile.thresholds if profile is not None else {}

    def embed_query(self, text: str) -> np.ndarray:
        """A search query's vector: the LRU, else the model (remembered in the LRU only; see `query_vector`). A
        model with a query prefix of its own embeds a query apart from the same text as a document."""
        inner_query = getattr(self.inner, "embed_query", None)
        asymmetric = getattr(self.inner, "query_prefix", "") != getattr(self.inner, "passage_prefix", "")
        cipher = cipher_of(self.engine) if self.engine is not None else None
        key = text_hash("\x00query\x00" + text if asymmetric else text, cipher)
        found = self._from_lru([key])
        if key not in found:
            vector = inner_query(text) if inner_query is not None else self.inner.embed([text])[0]
            found[key] = np.asarray(vector, dtype=np.float32)
            self.computed += 1
            self._remember(found)
        return found[key]

    def _from_lru(self, keys: list[str]) -> dict[str, np.ndarray]:
        with self._lock:
            hits = {k: self._lru[k] for k in keys if k in self._lru}
            for k in hits:
                self._lru.move_to_end(k)
        return hits

    def _remember(self, vectors: dict[str, np.ndarray]) -> None:
        with self._lock:
            for key, vector in vectors.items():
                self._lru[key] = vector
                self._lru.move_to_end(key)
            while len(self._lru) > self.lru_size:
                self._lru.popitem(last=False)

    def _from_sql(self, keys: list[str]) -> dict[str, np.ndarray]:
        table, found = embedding_cache_table, {}
        assert self.engine is not None  # read only when there is one (`embed`)
        with self.engine.connect() as conn:
            for chunk in batched(keys, 500):
                rows = conn.execute(
                    select(table.c.text_hash, table.c.vector).where(
                        table.c.model == self.model_id, table.c.text_hash.in_(list(chunk))
                    )
                )
                found.update({h: np.frombuffer(v, dtype=np.float32) for h, v in rows})
        return found

    def _rows(self, vectors: dict[str, np.ndarray]) -> list[dict[str, Any]]:
        return [
            {
                "model": self.model_id,
                "text_hash": k,
                "dim": int(v.shape[0]),
                "vector": np.asarray(v, dtype=np.float32).tobytes(),
            }
            for k, v in vectors.items()
        ]

    def _to_sql(self, vectors: dict[str, np.ndarray]) -> None:
        rows = self._rows(vectors)
        assert self.engine is not None  # written only when there is one (`embed`)
        try:
            with self.engine.begin() as conn:
                conn.execute(embedding_cache_table.insert(), rows)
        except IntegrityError:  # another process cached some of them first: insert the rest one by one
            for row in rows:
                try:
                    with self.engine.begin() as conn:
                        conn.execute(embedding_cache_table.insert(), [row])
                except IntegrityError:
                    pass


def embed_for_write(embedder: Embedder, texts: Sequence[str], rows: list[dict[str, Any]]) -> np.ndarray:
    """Vectors for texts about to be written; a cache's new SQL rows go to `rows` (see `CachedEmbedder.embed`)."""
    if isinstance(embedder, CachedEmbedder):
        return embedder.embed(texts, defer=rows)
    return embedder.embed(list(texts))


def write_cache_rows(conn: Connection, rows: list[dict[str, Any]]) -> None:
    """Write deferred cache rows in the caller's transaction; rows another writer cached first are skipped (a
    failure here must not fail the write they ride with)."""
    if not rows:
        return
    conn.execute(dialect(conn).insert(embedding_cache_table).on_conflict_do_nothing(), rows)
