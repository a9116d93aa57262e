"""Where archival memories live: one store interface, two Qdrant adapters, isolation built in.

- `EdgeBackend`: Qdrant Edge, Qdrant's in-process engine, one shard on disk under
  `$PAGEMIND_HOME/qdrant/<model>-<dim>` (WAL on). The default; one writer process (a second one gets a clear
  `StoreLocked` error naming the process that holds it).
- `ServerBackend`: `qdrant-client` against a Qdrant server or cluster (`QDRANT_URL`, `QDRANT_API_KEY`), one
  collection per model and dimension. Tests drive it with qdrant-client's in-memory local mode.

Both hold every agent's memories (one shard/collection per embedding model, `agent_id` a tenant keyword index),
with a named dense vector `dense` (cosine) and a sparse vector `bm25` (IDF modifier; terms from Qdrant's own
`Bm25`, so the same sparse vectors work on both sides). Nothing outside this module touches a backend
directly: callers get an `AgentStore`, bound to one agent, which adds the agent condition to every read,
write and delete. No argument of any method can name another agent.
"""

from __future__ import annotations

import atexit
import os
import re
import threading
import uuid
import warnings
from abc import ABC, abstractmethod
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import structlog
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

log = structlog.get_logger("pagemind.archival_store")

DENSE, SPARSE = "dense", "bm25"
PID_FILE = "pagemind.pid"
UPSERT_BATCH = 256  # Edge holds the GIL for a whole update: keep each call a few ms


def to_epoch(value: datetime | None) -> float | None:
    """A datetime as POSIX seconds (naive means UTC)."""
    if value is None:
        return None
    return (value if value.tzinfo else value.replace(tzinfo=timezone.utc)).timestamp()


def from_epoch(value: float | None) -> datetime | None:
    """POSIX seconds as an aware UTC datetime."""
    return None if value is None else datetime.fromtimestamp(float(value), tz=timezone.utc)


class MemoryRecord(BaseModel):
    """One archival memory: its payload in the store (timestamps as POSIX seconds there)."""

    model_config = ConfigDict(extra="ignore")

    id: str = ""  # derived from content when empty: see _derived_id
    agent_id: str
    user_id: str | None = None
    text: str
    kind: str = "fact"
    importance: float = Field(0.5, ge=0, le=1)
    tags: list[str] = Field(default_factory=list)
    created_at: datetime
    updated_at: datetime
    last_hit_at: datetime | None = None
    hit_count: int = 0
    source_message_ids: list[int] = Field(default_factory=list)
    expires_at: datetime | None = None
    superseded_by: str | None = None

    @model_validator(mode="after")
    def _derived_id(self) -> "MemoryRecord":
        # Derived, not random: a replayed run (same clock, same text) creates the same ids, so traces compare.
        if not self.id:
            key = f"{self.agent_id}|{self.kind}|{self.created_at.isoformat()}|{self.text}"
            self.id = str(uuid.uuid5(uuid.NAMESPACE_URL, f"pagemind:memory:{key}"))
        return self

    @field_validator("created_at", "updated_at", "last_hit_at", "expires_at", mode="before")
    @classmethod
    def _epoch_or_datetime(cls, value: Any) -> Any:
        return from_epoch(value) if isinstance(value, (int, float)) else value

    def payload(self) -> dict[str, Any]:
        """The payload stored beside the vectors (the id is the point id)."""
        data = self.model_dump(exclude={"id"})
        for key in ("created_at", "updated_at", "last_hit_at", "expires_at"):
            data[key] = to_epoch(data[key])
        return data

    @classmethod
    def from_point(cls, point_id: Any, payload: dict[str, Any]) -> "MemoryRecord":
        """Rebuild a record from a point id and its payload."""
        return cls(id=str(point_id), **payload)

    def live_at(self, now: datetime) -> bool:
        """Not superseded and not expired at `now`."""
        return self.superseded_by is None and (self.expires_at is None or self.expires_at > now)


class MemoryFilter(BaseModel):
    """Which of an agent's memories a read considers. The agent itself is never part of it: the scope adds it."""

    model_config = ConfigDict(extra="forbid")

    ids: list[str] | None = None
    user_id: str | None = None
    kinds: list[str] | None = None
    tags: list[str] | None = None
    created_from: datetime | None = None
    created_to: datetime | None = None
    live_at: datetime | None = Field(None, description="only memories neither superseded nor expired at this time")


@dataclass(frozen=True)
class Sparse:
    """A sparse vector: term ids and weights."""

    indices: list[int]
    values: list[float]


@dataclass(frozen=True)
class StoredPoint:
    """What is written: the record, its dense vector and its keyword (sparse) vector."""

    record: MemoryRecord
    dense: np.ndarray
    sparse: Sparse


@dataclass(frozen=True)
class Hit:
    """A scored record from one retriever."""

    record: MemoryRecord
    score: float


class StoreError(RuntimeError):
    """The archival store cannot be used."""


class StoreLocked(StoreError):
    """The embedded store is open in another process."""


class ArchivalBackend(ABC):
    """A vector store holding every agent's memories. Every method takes the agent explicitly and must add it
    to the query; only `AgentStore` calls these."""

    name: str
    location: str

    @abstractmethod
    def upsert(self, agent_id: str, points: Sequence[StoredPoint]) -> None:
        """Insert or replace points (their `agent_id` must already be `agent_id`); durable on return."""

    @abstractmethod
    def search_dense(self, agent_id: str, vector: np.ndarray, flt: MemoryFilter, limit: int) -> list[Hit]:
        """Nearest memories by cosine similarity."""

    @abstractmethod
    def search_sparse(self, agent_id: str, vector: Sparse, flt: MemoryFilter, limit: int) -> list[Hit]:
        """Best keyword (BM25) matches."""

    @abstractmethod
    def dense_vectors(self, agent_id: str, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """The stored dense vectors of some of the agent's memories."""

    @abstractmethod
    def scroll(self, agent_id: str, flt: MemoryFilter, limit: int, offset: str | None) -> tuple[list[MemoryRecord], str | None]:
        """A page of the agent's memories and the offset of the next page (None at the end)."""

    @abstractmethod
    def count(self, agent_id: str, flt: MemoryFilter) -> int:
        """How many of the agent's memories match."""

    @abstractmethod
    def set_payload(self, agent_id: str, memory_id: str, fields: dict[str, Any]) -> None:
        """Update some payload fields of one of the agent's memories; durable on return."""

    @abstractmethod
    def delete(self, agent_id: str, ids: Sequence[str]) -> None:
        """Delete some of the agent's memories (really: points and payload); durable on return."""

    @abstractmethod
    def close(self) -> None:
        """Flush and release the store."""

    def get(self, agent_id: str, ids: Sequence[str]) -> list[MemoryRecord]:
        """Some of the agent's memories by id (others' ids come back as nothing)."""
        if not ids:
            return []
        records, _ = self.scroll(agent_id, MemoryFilter(ids=list(ids)), len(ids), None)
        return records


class AgentStore:
    """The archival store as one agent sees it: every call is scoped to `agent_id`, fixed at construction."""

    def __init__(self, backend: ArchivalBackend, agent_id: str):
        if not agent_id:
            raise ValueError("an agent id is required")
        self._backend = backend
        self.agent_id = agent_id

    @property
    def location(self) -> str:
        """Where the memories live (a path or a URL), for messages."""
        return self._backend.location

    def upsert(self, points: Sequence[StoredPoint]) -> None:
        """Write points as this agent's (whatever agent their records named)."""
        owned = [StoredPoint(p.record.model_copy(update={"agent_id": self.agent_id}), p.dense, p.sparse) for p in points]
        for start in range(0, len(owned), UPSERT_BATCH):
            self._backend.upsert(self.agent_id, owned[start:start + UPSERT_BATCH])

    def search_dense(self, vector: np.ndarray, flt: MemoryFilter, limit: int) -> list[Hit]:
        """This agent's nearest memories."""
        return self._backend.search_dense(self.agent_id, vector, flt, limit)

    def search_sparse(self, vector: Sparse, flt: MemoryFilter, limit: int) -> list[Hit]:
        """This agent's best keyword matches."""
        return self._backend.search_sparse(self.agent_id, vector, flt, limit) if vector.indices else []

    def dense_vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """Dense vectors of this agent's memories."""
        return self._backend.dense_vectors(self.agent_id, ids) if ids else {}

    def get(self, ids: Sequence[str]) -> list[MemoryRecord]:
        """This agent's memories by id."""
        return self._backend.get(self.agent_id, ids)

    def scroll(self, flt: MemoryFilter, limit: int = 256, offset: str | None = None) -> tuple[list[MemoryRecord], str | None]:
        """A page of this agent's memories."""
        return self._backend.scroll(self.agent_id, flt, limit, offset)

    def all(self, flt: MemoryFilter | None = None) -> list[MemoryRecord]:
        """Every memory of this agent that matches (inspection, statistics; not the hot path)."""
        records, offset = [], None
        while True:
            page, offset = self.scroll(flt or MemoryFilter(), 512, offset)
            records += page
            if offset is None:
                return records

    def count(self, flt: MemoryFilter | None = None) -> int:
        """How many of this agent's memories match."""
        return self._backend.count(self.agent_id, flt or MemoryFilter())

    def set_payload(self, memory_id: str, fields: dict[str, Any]) -> None:
        """Update fields of one of this agent's memories (the owner cannot be changed)."""
        fields = {k: v for k, v in fields.items() if k not in {"agent_id", "id"}}
        self._backend.set_payload(self.agent_id, memory_id, fields)

    def delete(self, ids: Sequence[str]) -> None:
        """Delete some of this agent's memories; ids of other agents' memories are ignored."""
        if ids:
            self._backend.delete(self.agent_id, list(ids))


# -- Qdrant Edge (embedded) ---------------------------------------------------------------------------------------


def _edge_filter(agent_id: str, flt: MemoryFilter) -> Any:
    from qdrant_edge import (FieldCondition, Filter, HasIdCondition, IsEmptyCondition, MatchAny, MatchValue,
                             RangeFloat)

    must: list[Any] = [FieldCondition(key="agent_id", match=MatchValue(agent_id))]
    must_not: list[Any] = []
    if flt.ids is not None:
        must.append(HasIdCondition({uuid.UUID(i) for i in flt.ids}))
    if flt.user_id is not None:
        must.append(FieldCondition(key="user_id", match=MatchValue(flt.user_id)))
    if flt.kinds:
        must.append(FieldCondition(key="kind", match=MatchAny(list(flt.kinds))))
    if flt.tags:
        must.append(FieldCondition(key="tags", match=MatchAny(list(flt.tags))))
    if flt.created_from or flt.created_to:
        must.append(FieldCondition(key="created_at", range=RangeFloat(gte=to_epoch(flt.created_from),
                                                                     lte=to_epoch(flt.created_to))))
    if flt.live_at is not None:
        must.append(IsEmptyCondition("superseded_by"))
        must_not.append(FieldCondition(key="expires_at", range=RangeFloat(lte=to_epoch(flt.live_at))))
    return Filter(must=must, must_not=must_not or None)


def _holder(folder: Path) -> str:
    pid_file = folder / PID_FILE
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return "another process"
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        command = ""
    return f"process {pid}" + (f" ({command})" if command else "")


class EdgeBackend(ArchivalBackend):
    """Qdrant Edge: one shard directory, every agent in it (tenant index on `agent_id`), WAL on."""

    name = "qdrant-edge"

    def __init__(self, folder: Path, dim: int):
        import qdrant_edge as qe

        self.qe = qe
        self.folder = Path(folder)
        self.location = str(self.folder)
        self.dim = dim
        self._lock = threading.Lock()
        self.shard = self._open()
        (self.folder / PID_FILE).write_text(str(os.getpid()))
        log.info("archival_store_open", backend=self.name, path=self.location, dim=dim)

    def _config(self) -> Any:
        qe = self.qe
        return qe.EdgeConfig(
            vectors={DENSE: qe.EdgeVectorParams(size=self.dim, distance=qe.Distance.Cosine)},
            sparse_vectors={SPARSE: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
        )

    def _open(self) -> Any:
        qe = self.qe
        try:
            if (self.folder / "edge_config.json").exists():
                return qe.EdgeShard.load(str(self.folder), self._config())
            self.folder.mkdir(parents=True, exist_ok=True)
            shard = qe.EdgeShard.create(str(self.folder), self._config())
        except Exception as exc:
            if "WouldBlock" in str(exc):
                raise StoreLocked(
                    f"the archival store at {self.folder} is in use by {_holder(self.folder)}. The embedded Qdrant "
                    "store has one writer process: stop that process, or point every process at one Qdrant "
                    "server (set QDRANT_URL, and QDRANT_API_KEY if it needs one).") from None
            raise StoreError(f"cannot open the archival store at {self.folder}: {exc}") from exc
        self._create_indexes(shard)
        return shard

    def _create_indexes(self, shard: Any) -> None:
        qe = self.qe
        shard.update(qe.UpdateOperation.create_field_index("agent_id", qe.KeywordIndexParams(is_tenant=True)))
        for key in ("user_id", "kind", "tags", "superseded_by"):
            shard.update(qe.UpdateOperation.create_field_index(key, qe.PayloadSchemaType.Keyword))
        for key in ("created_at", "expires_at"):
            shard.update(qe.UpdateOperation.create_field_index(key, qe.PayloadSchemaType.Float))
        shard.flush()

    def _point(self, point: StoredPoint) -> Any:
        qe = self.qe
        vectors = {DENSE: np.asarray(point.dense, dtype=np.float32)}
        if point.sparse.indices:
            vectors[SPARSE] = qe.SparseVector(point.sparse.indices, point.sparse.values)
        return qe.Point(uuid.UUID(point.record.id), vectors, point.record.payload())

    def upsert(self, agent_id: str, points: Sequence[StoredPoint]) -> None:
        if any(p.record.agent_id != agent_id for p in points):
            raise StoreError("refusing to write another agent's memory")
        with self._lock:
            self.shard.update(self.qe.UpdateOperation.upsert_points([self._point(p) for p in points]))
            self.shard.flush()

    def _query(self, agent_id: str, query: Any, flt: MemoryFilter, limit: int) -> list[Hit]:
        qe = self.qe
        request = qe.QueryRequest(limit=limit, query=query, filter=_edge_filter(agent_id, flt), with_payload=True,
                                  with_vector=False)
        with self._lock:
            points = self.shard.query(request)
        return [Hit(MemoryRecord.from_point(p.id, p.payload), float(p.score)) for p in points]

    def search_dense(self, agent_id: str, vector: np.ndarray, flt: MemoryFilter, limit: int) -> list[Hit]:
        query = self.qe.Query.Nearest(np.asarray(vector, dtype=np.float32).tolist(), using=DENSE)
        return self._query(agent_id, query, flt, limit)

    def search_sparse(self, agent_id: str, vector: Sparse, flt: MemoryFilter, limit: int) -> list[Hit]:
        query = self.qe.Query.Nearest(self.qe.SparseVector(vector.indices, vector.values), using=SPARSE)
        return self._query(agent_id, query, flt, limit)

    def dense_vectors(self, agent_id: str, ids: Sequence[str]) -> dict[str, np.ndarray]:
        request = self.qe.ScrollRequest(limit=len(ids), filter=_edge_filter(agent_id, MemoryFilter(ids=list(ids))),
                                        with_payload=False, with_vector=[DENSE])
        with self._lock:
            records, _ = self.shard.scroll(request)
        return {str(r.id): np.asarray(r.vector[DENSE], dtype=np.float32) for r in records}

    def scroll(self, agent_id: str, flt: MemoryFilter, limit: int, offset: str | None) -> tuple[list[MemoryRecord], str | None]:
        request = self.qe.ScrollRequest(offset=uuid.UUID(offset) if offset else None, limit=limit,
                                        filter=_edge_filter(agent_id, flt), with_payload=True, with_vector=False)
        with self._lock:
            records, next_offset = self.shard.scroll(request)
        return [MemoryRecord.from_point(r.id, r.payload) for r in records], (str(next_offset) if next_offset else None)

    def count(self, agent_id: str, flt: MemoryFilter) -> int:
        with self._lock:
            return int(self.shard.count(self.qe.CountRequest(exact=True, filter=_edge_filter(agent_id, flt))))

    def set_payload(self, agent_id: str, memory_id: str, fields: dict[str, Any]) -> None:
        payload = {k: to_epoch(v) if isinstance(v, datetime) else v for k, v in fields.items()}
        flt = _edge_filter(agent_id, MemoryFilter(ids=[memory_id]))
        with self._lock:
            self.shard.update(self.qe.UpdateOperation.set_payload_by_filter(flt, payload))
            self.shard.flush()

    def delete(self, agent_id: str, ids: Sequence[str]) -> None:
        flt = _edge_filter(agent_id, MemoryFilter(ids=list(ids)))
        with self._lock:
            self.shard.update(self.qe.UpdateOperation.delete_points_by_filter(flt))
            self.shard.flush()

    def close(self) -> None:
        with self._lock:
            if self.shard is not None:
                self.shard.close()
                self.shard = None
                (self.folder / PID_FILE).unlink(missing_ok=True)
                log.info("archival_store_closed", backend=self.name, path=self.location)


# -- qdrant-client (a Qdrant server or cluster) -------------------------------------------------------------------


def _client_filter(agent_id: str, flt: MemoryFilter) -> Any:
    from qdrant_client import models as m

    must: list[Any] = [m.FieldCondition(key="agent_id", match=m.MatchValue(value=agent_id))]
    must_not: list[Any] = []
    if flt.ids is not None:
        must.append(m.HasIdCondition(has_id=list(flt.ids)))
    if flt.user_id is not None:
        must.append(m.FieldCondition(key="user_id", match=m.MatchValue(value=flt.user_id)))
    if flt.kinds:
        must.append(m.FieldCondition(key="kind", match=m.MatchAny(any=list(flt.kinds))))
    if flt.tags:
        must.append(m.FieldCondition(key="tags", match=m.MatchAny(any=list(flt.tags))))
    if flt.created_from or flt.created_to:
        must.append(m.FieldCondition(key="created_at", range=m.Range(gte=to_epoch(flt.created_from),
                                                                    lte=to_epoch(flt.created_to))))
    if flt.live_at is not None:
        must.append(m.IsEmptyCondition(is_empty=m.PayloadField(key="superseded_by")))
        must_not.append(m.FieldCondition(key="expires_at", range=m.Range(lte=to_epoch(flt.live_at))))
    return m.Filter(must=must, must_not=must_not or None)


class ServerBackend(ArchivalBackend):
    """A Qdrant server or cluster through `qdrant-client`: one collection per embedding model and dimension."""

    name = "qdrant-server"

    def __init__(self, client: Any, collection: str, dim: int, location: str):
        self.client = client
        self.collection = collection
        self.dim = dim
        self.location = f"{location} (collection {collection})"
        self._ensure_collection()
        log.info("archival_store_open", backend=self.name, location=self.location, dim=dim)

    @classmethod
    def connect(cls, url: str, api_key: str | None, collection: str, dim: int) -> "ServerBackend":
        """Connect to the server at `url` (":memory:" gives qdrant-client's local test double)."""
        from qdrant_client import QdrantClient

        client = QdrantClient(location=":memory:") if url == ":memory:" else QdrantClient(url=url, api_key=api_key)
        return cls(client, collection, dim, url)

    def _ensure_collection(self) -> None:
        from qdrant_client import models as m

        if self.client.collection_exists(self.collection):
            return
        self.client.create_collection(
            self.collection,
            vectors_config={DENSE: m.VectorParams(size=self.dim, distance=m.Distance.COSINE)},
            sparse_vectors_config={SPARSE: m.SparseVectorParams(modifier=m.Modifier.IDF)},
        )
        with warnings.catch_warnings():  # local mode (tests) ignores indexes, and says so
            warnings.simplefilter("ignore")
            self._create_indexes()

    def _create_indexes(self) -> None:
        from qdrant_client import models as m

        self.client.create_payload_index(self.collection, "agent_id",
                                         m.KeywordIndexParams(type=m.KeywordIndexType.KEYWORD, is_tenant=True))
        for key in ("user_id", "kind", "tags", "superseded_by"):
            self.client.create_payload_index(self.collection, key, m.PayloadSchemaType.KEYWORD)
        for key in ("created_at", "expires_at"):
            self.client.create_payload_index(self.collection, key, m.PayloadSchemaType.FLOAT)

    def upsert(self, agent_id: str, points: Sequence[StoredPoint]) -> None:
        from qdrant_client import models as m

        if any(p.record.agent_id != agent_id for p in points):
            raise StoreError("refusing to write another agent's memory")
        structs = []
        for p in points:
            vector: dict[str, Any] = {DENSE: np.asarray(p.dense, dtype=np.float32).tolist()}
            if p.sparse.indices:
                vector[SPARSE] = m.SparseVector(indices=p.sparse.indices, values=p.sparse.values)
            structs.append(m.PointStruct(id=p.record.id, vector=vector, payload=p.record.payload()))
        self.client.upsert(self.collection, structs, wait=True)

    def _query(self, agent_id: str, query: Any, using: str, flt: MemoryFilter, limit: int) -> list[Hit]:
        response = self.client.query_points(self.collection, query=query, using=using, limit=limit,
                                            query_filter=_client_filter(agent_id, flt), with_payload=True)
        return [Hit(MemoryRecord.from_point(p.id, p.payload), float(p.score)) for p in response.points]

    def search_dense(self, agent_id: str, vector: np.ndarray, flt: MemoryFilter, limit: int) -> list[Hit]:
        return self._query(agent_id, np.asarray(vector, dtype=np.float32).tolist(), DENSE, flt, limit)

    def search_sparse(self, agent_id: str, vector: Sparse, flt: MemoryFilter, limit: int) -> list[Hit]:
        from qdrant_client import models as m

        return self._query(agent_id, m.SparseVector(indices=vector.indices, values=vector.values), SPARSE, flt, limit)

    def dense_vectors(self, agent_id: str, ids: Sequence[str]) -> dict[str, np.ndarray]:
        records, _ = self.client.scroll(self.collection, scroll_filter=_client_filter(agent_id, MemoryFilter(ids=list(ids))),
                                        limit=len(ids), with_payload=False, with_vectors=[DENSE])
        return {str(r.id): np.asarray(r.vector[DENSE], dtype=np.float32) for r in records}

    def scroll(self, agent_id: str, flt: MemoryFilter, limit: int, offset: str | None) -> tuple[list[MemoryRecord], str | None]:
        records, next_offset = self.client.scroll(self.collection, scroll_filter=_client_filter(agent_id, flt),
                                                  limit=limit, offset=offset, with_payload=True, with_vectors=False)
        return [MemoryRecord.from_point(r.id, r.payload) for r in records], (str(next_offset) if next_offset else None)

    def count(self, agent_id: str, flt: MemoryFilter) -> int:
        return int(self.client.count(self.collection, count_filter=_client_filter(agent_id, flt), exact=True).count)

    def set_payload(self, agent_id: str, memory_id: str, fields: dict[str, Any]) -> None:
        payload = {k: to_epoch(v) if isinstance(v, datetime) else v for k, v in fields.items()}
        self.client.set_payload(self.collection, payload=payload,
                                points=_client_filter(agent_id, MemoryFilter(ids=[memory_id])), wait=True)

    def delete(self, agent_id: str, ids: Sequence[str]) -> None:
        from qdrant_client import models as m

        selector = m.FilterSelector(filter=_client_filter(agent_id, MemoryFilter(ids=list(ids))))
        self.client.delete(self.collection, points_selector=selector, wait=True)

    def close(self) -> None:
        self.client.close()


# -- opening the configured store -----------------------------------------------------------------------------------

_OPEN: dict[str, ArchivalBackend] = {}
_OPEN_LOCK = threading.Lock()


def store_name(model_id: str, dim: int) -> str:
    """The shard folder / collection name for an embedding model and dimension."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{model_id}-{dim}")


def open_backend(home: Path, dim: int, model_id: str, qdrant_url: str | None = None,
                 qdrant_api_key: str | None = None) -> ArchivalBackend:
    """The process's store for this model: a Qdrant server when `qdrant_url` is set, else the embedded shard
    under `home/qdrant/`. Opened once per process and shared by every agent in it."""
    name = store_name(model_id, dim)
    key = f"{qdrant_url}#{name}" if qdrant_url else str((Path(home) / "qdrant" / name).resolve())
    with _OPEN_LOCK:
        backend = _OPEN.get(key)
        if backend is None:
            backend = (ServerBackend.connect(qdrant_url, qdrant_api_key, f"pagemind_{name}", dim) if qdrant_url
                       else EdgeBackend(Path(key), dim))
            _OPEN[key] = backend
        return backend


def close_all() -> None:
    """Close every store this process opened (at exit, and between tests that reopen a shard)."""
    with _OPEN_LOCK:
        backends = list(_OPEN.values())
        _OPEN.clear()
    for backend in backends:
        try:
            backend.close()
        except Exception:  # closing at exit must not mask the real error
            log.exception("archival_store_close_failed", location=backend.location)


atexit.register(close_all)
