"""The vector-store interface every backend implements, and `AgentStore`, the only way callers reach one.

A backend holds every agent's memories; `AgentStore` binds it to one agent and adds that agent to every read,
write and delete. No argument of any `AgentStore` method can name another agent.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any

import numpy as np

from pagemind.runtime.crypto.cipher import TextCipher, is_sealed
from pagemind.runtime.crypto.columns import open_text
from pagemind.runtime.memory.vectors.records import Hit, MemoryFilter, MemoryRecord, Sparse, StoredPoint

UPSERT_BATCH = 256  # Edge holds the GIL for a whole update: keep each call a few ms
TEXT = "text"  # the payload field sealed at rest when the store has a cipher (`seal_with`)


class ArchivalBackend(ABC):
    """A vector store holding every agent's memories. Every method takes the agent explicitly and must add it
    to the query; only `AgentStore` calls these."""

    name: str
    location: str
    exclusive: bool = False  # True: no other process can write this store while it is open (the embedded one)
    cipher: TextCipher | None = None  # seals each payload's text (`seal_with`); None: stored as given

    def seal_with(self, cipher: TextCipher | None) -> None:
        """Seal every payload's text written from now on with `cipher`, and open it on every read (the cipher of
        the database whose memories this store holds: `runtime.crypto`)."""
        self.cipher = cipher

    def sealed_payload(self, point: StoredPoint) -> dict[str, Any]:
        """A point's payload as stored: its text sealed when the store has a cipher."""
        return self.sealed_fields(point.payload())

    def sealed_fields(self, fields: dict[str, Any]) -> dict[str, Any]:
        """Payload fields as stored: a `text` among them sealed when the store has a cipher."""
        if self.cipher is not None and isinstance(fields.get(TEXT), str):
            return fields | {TEXT: self.cipher.seal(fields[TEXT])}
        return fields

    def record_of(self, point_id: Any, payload: dict[str, Any] | None) -> MemoryRecord:
        """The record a stored point holds, its text opened (a sealed text without the key raises)."""
        payload = payload or {}
        text = payload.get(TEXT)
        if isinstance(text, str) and is_sealed(text):
            payload = payload | {TEXT: open_text(text, self.cipher)}
        return MemoryRecord.from_point(point_id, payload)

    @abstractmethod
    def upsert(self, agent_id: int, points: Sequence[StoredPoint]) -> None:
        """Insert or replace points (their `agent_id` must already be `agent_id`); durable on return."""

    def upsert_all(self, points: dict[int, list[StoredPoint]]) -> None:
        """Several agents' points in one write (a group commit: `memory.group_commit`); durable on return."""
        for agent_id, some in points.items():
            self.upsert(agent_id, some)

    @abstractmethod
    def search_dense(
        self,
        agent_id: int,
        vector: np.ndarray,
        flt: MemoryFilter,
        limit: int,
        exact: bool = False,
        ef: int | None = None,
    ) -> list[Hit]:
        """Nearest memories by cosine similarity: through the index (`memory.index`; `ef` graph candidates, None:
        the plan's `hnsw_ef`), or compared one by one when `exact` (what benchmarks measure the index's recall
        against)."""

    @abstractmethod
    def search_sparse(self, agent_id: int, vector: Sparse, flt: MemoryFilter, limit: int) -> list[Hit]:
        """Best keyword (BM25) matches."""

    def search_hybrid(
        self, agent_id: int, dense: np.ndarray | None, sparse: Sparse | None, flt: MemoryFilter, limit: int
    ) -> tuple[list[Hit], list[Hit]]:
        """(nearest, best keyword matches) in one call where the store can batch them (a retriever given None
        returns nothing)."""
        return (
            self.search_dense(agent_id, dense, flt, limit) if dense is not None else [],
            self.search_sparse(agent_id, sparse, flt, limit) if sparse is not None and sparse.indices else [],
        )

    @abstractmethod
    def dense_vectors(self, agent_id: int, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """The stored dense vectors of some of the agent's memories."""

    @abstractmethod
    def scroll(
        self, agent_id: int, flt: MemoryFilter, limit: int, offset: str | None
    ) -> tuple[list[MemoryRecord], str | None]:
        """A page of the agent's memories and the offset of the next page (None at the end)."""

    @abstractmethod
    def point_origins(self, agent_id: int) -> dict[str, str | None]:
        """Every point the agent has (superseded and expired ones included): its id, and the identity of the
        database that wrote it (None for points written before points carried one)."""

    @abstractmethod
    def count(self, agent_id: int, flt: MemoryFilter) -> int:
        """How many of the agent's memories match."""

    @abstractmethod
    def set_payload(self, agent_id: int, memory_id: str, fields: dict[str, Any]) -> None:
        """Update some payload fields of one of the agent's memories; durable on return."""

    def set_payloads(self, agent_id: int, memory_ids: Sequence[str], fields: dict[str, Any]) -> None:
        """The same payload fields on several of the agent's memories, in one write where the store can (a
        search's hit counts: `ArchivalSearch.count_hits`); durable on return."""
        for memory_id in memory_ids:
            self.set_payload(agent_id, memory_id, fields)

    @abstractmethod
    def delete(self, agent_id: int, ids: Sequence[str]) -> None:
        """Delete some of the agent's memories (really: points and payload); durable on return."""

    @abstractmethod
    def rekey(self, old_key: str, agent_id: int) -> None:
        """Give the points still keyed by `old_key` (an agent's name, before payload version 2) the agent's id.
        Idempotent: points already keyed by an id are never matched again; durable on return."""

    @abstractmethod
    def delete_agents(self, keys: Sequence[str]) -> int:
        """Delete every point whose `agent_id` payload is one of `keys` (an agent's tenant key, or a name its points
        were keyed by before re-keying), payload and vectors; how many there were. Durable on return; their bytes
        stay in the store's files until `compact`."""

    @abstractmethod
    def compact(self) -> None:
        """Leave no byte of deleted points in the store's files (erasure)."""

    @abstractmethod
    def close(self) -> None:
        """Flush and release the store."""

    def get(self, agent_id: int, ids: Sequence[str]) -> list[MemoryRecord]:
        """Some of the agent's memories by id (others' ids come back as nothing)."""
        if not ids:
            return []
        records, _ = self.scroll(agent_id, MemoryFilter(ids=list(ids)), len(ids), None)
        return records


class AgentStore:
    """The archival store as one agent sees it: every call is scoped to `agent_id`, fixed at construction."""

    def __init__(self, backend: ArchivalBackend, agent_id: int, origin: str | None = None):
        if not agent_id:
            raise ValueError("an agent id is required")
        self._backend = backend
        self.agent_id = agent_id
        self.origin = origin

    @property
    def location(self) -> str:
        """Where the memories live (a path or a URL), for messages."""
        return self._backend.location

    def upsert(self, points: Sequence[StoredPoint]) -> None:
        """Write points as this agent's (whatever agent their records named), marked with this store's origin."""
        owned = self.owned(points)
        for start in range(0, len(owned), UPSERT_BATCH):
            self._backend.upsert(self.agent_id, owned[start : start + UPSERT_BATCH])

    def owned(self, points: Sequence[StoredPoint]) -> list[StoredPoint]:
        """The points as this agent's (whatever agent their records named), marked with this store's origin."""
        return [
            StoredPoint(
                p.record.model_copy(update={"agent_id": self.agent_id}), p.dense, p.sparse, self.origin or p.origin
            )
            for p in points
        ]

    @property
    def backend(self) -> ArchivalBackend:
        """The shared store behind this view (the group commit writes several agents' points to it at once)."""
        return self._backend

    def search_dense(
        self, vector: np.ndarray, flt: MemoryFilter, limit: int, exact: bool = False, ef: int | None = None
    ) -> list[Hit]:
        """This agent's nearest memories (`exact`: without the index; `ef`: graph candidates, None: the plan's)."""
        return self._backend.search_dense(self.agent_id, vector, flt, limit, exact, ef)

    def search_hybrid(
        self, dense: np.ndarray | None, sparse: Sparse | None, flt: MemoryFilter, limit: int
    ) -> tuple[list[Hit], list[Hit]]:
        """This agent's nearest memories and best keyword matches, in one call (None: that retriever is off)."""
        if sparse is not None and not sparse.indices:
            sparse = None
        return self._backend.search_hybrid(self.agent_id, dense, sparse, flt, limit)

    def search_sparse(self, vector: Sparse, flt: MemoryFilter, limit: int) -> list[Hit]:
        """This agent's best keyword matches."""
        return self._backend.search_sparse(self.agent_id, vector, flt, limit) if vector.indices else []

    def dense_vectors(self, ids: Sequence[str]) -> dict[str, np.ndarray]:
        """Dense vectors of this agent's memories."""
        return self._backend.dense_vectors(self.agent_id, ids) if ids else {}

    def get(self, ids: Sequence[str]) -> list[MemoryRecord]:
        """This agent's memories by id."""
        return self._backend.get(self.agent_id, ids)

    def scroll(
        self, flt: MemoryFilter, limit: int = 256, offset: str | None = None
    ) -> tuple[list[MemoryRecord], str | None]:
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

    def ids(self) -> set[str]:
        """The ids of every point of this agent."""
        return set(self._backend.point_origins(self.agent_id))

    def origins(self) -> dict[str, str | None]:
        """Every point of this agent, with the identity of the database that wrote it."""
        return self._backend.point_origins(self.agent_id)

    def count(self, flt: MemoryFilter | None = None) -> int:
        """How many of this agent's memories match."""
        return self._backend.count(self.agent_id, flt or MemoryFilter())

    def set_payload(self, memory_id: str, fields: dict[str, Any]) -> None:
        """Update fields of one of this agent's memories (the owner cannot be changed)."""
        fields = {k: v for k, v in fields.items() if k not in {"agent_id", "id"}}
        self._backend.set_payload(self.agent_id, memory_id, fields)

    def set_payloads(self, memory_ids: Sequence[str], fields: dict[str, Any]) -> None:
        """The same fields on several of this agent's memories (the owner cannot be changed)."""
        fields = {k: v for k, v in fields.items() if k not in {"agent_id", "id"}}
        if memory_ids:
            self._backend.set_payloads(self.agent_id, list(memory_ids), fields)

    def delete(self, ids: Sequence[str]) -> None:
        """Delete some of this agent's memories; ids of other agents' memories are ignored."""
        if ids:
            self._backend.delete(self.agent_id, list(ids))
