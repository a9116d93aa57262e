"""Archival memory as the vector store holds it: the record (its payload), filters, vectors, hits, errors.

Every point carries its agent's id in the payload key `agent_id`, as a keyword (Qdrant's tenant index is a
keyword index): `tenant_key(agent_id)`. Points written before the id became the key held the agent's NAME there
and lack `payload_version`; `ArchivalBackend.rekey` moves them over (see `memory.rekey`).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

DENSE, SPARSE = "dense", "bm25"
PAYLOAD_VERSION = 2  # 2: `agent_id` holds the agent's id (1, unmarked: its name)


def tenant_key(agent_id: int) -> str:
    """The payload value that names an agent's points (its id, as the keyword the tenant index holds)."""
    return str(int(agent_id))


def to_epoch(value: datetime | None) -> float | None:
    """A datetime as POSIX seconds (naive means UTC)."""
    if value is None:
        return None
    return (value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp()


def from_epoch(value: float | None) -> datetime | None:
    """POSIX seconds as an aware UTC datetime."""
    return None if value is None else datetime.fromtimestamp(float(value), tz=UTC)


class MemoryRecord(BaseModel):
    """One archival memory: its payload in the store (timestamps as POSIX seconds there)."""

    model_config = ConfigDict(extra="ignore")

    id: str = ""  # derived from content when empty: see _derived_id
    agent_id: int
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
    def _derived_id(self) -> MemoryRecord:
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
        data["agent_id"], data["payload_version"] = tenant_key(self.agent_id), PAYLOAD_VERSION
        return data

    @classmethod
    def from_point(cls, point_id: Any, payload: dict[str, Any]) -> MemoryRecord:
        """Rebuild a record from a point id and its payload. A search reads ~100 payloads, so a payload this
        version wrote is taken as it is (validation cost ≈ 10 µs each); anything else is validated."""
        if payload.get("payload_version") == PAYLOAD_VERSION:
            try:
                return cls._trusted(str(point_id), payload)
            except (KeyError, TypeError, ValueError):
                pass
        return cls(id=str(point_id), **payload)

    @classmethod
    def _trusted(cls, point_id: str, p: dict[str, Any]) -> MemoryRecord:
        created, updated = from_epoch(p["created_at"]), from_epoch(p["updated_at"])
        if created is None or updated is None:
            raise ValueError("a point without dates")
        return cls.model_construct(
            id=point_id,
            agent_id=int(p["agent_id"]),
            user_id=p.get("user_id"),
            text=str(p["text"]),
            kind=str(p.get("kind", "fact")),
            importance=float(p.get("importance", 0.5)),
            tags=list(p.get("tags") or []),
            created_at=created,
            updated_at=updated,
            last_hit_at=from_epoch(p.get("last_hit_at")),
            hit_count=int(p.get("hit_count") or 0),
            source_message_ids=list(p.get("source_message_ids") or []),
            expires_at=from_epoch(p.get("expires_at")),
            superseded_by=p.get("superseded_by"),
        )

    def last_used(self) -> datetime:
        """When the memory was last retrieved, refreshed or written (a refresh sets `last_hit_at` too)."""
        return max(self.updated_at, self.last_hit_at) if self.last_hit_at else self.updated_at

    def live_at(self, now: datetime) -> bool:
        """Not superseded and not expired at `now`."""
        return self.superseded_by is None and (self.expires_at is None or self.expires_at > now)


PINNED = "pinned"  # the tag of a pinned memory (`memory.review`): never dormant, expired or superseded by reflection


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
    unsuperseded: bool = Field(False, description="only memories not superseded (expired ones included)")
    used_since: datetime | None = Field(None, description="only memories retrieved, refreshed or written since then")


@dataclass(frozen=True)
class Sparse:
    """A sparse vector: term ids and weights."""

    indices: list[int]
    values: list[float]


@dataclass(frozen=True)
class StoredPoint:
    """What is written: the record, its dense vector and its keyword (sparse) vector, and the identity of the
    database that holds its row (`origin`, kept in the payload beside the record's fields)."""

    record: MemoryRecord
    dense: np.ndarray
    sparse: Sparse
    origin: str | None = None

    def payload(self) -> dict[str, Any]:
        """The point's payload: the record's, and its origin when known."""
        return self.record.payload() | ({"origin": self.origin} if self.origin else {})


@dataclass(frozen=True)
class Hit:
    """A scored record from one retriever (a keyword hit with its cosine to the query when the store gave it)."""

    record: MemoryRecord
    score: float
    cosine: float | None = None


class StoreError(RuntimeError):
    """The archival store cannot be used."""


class StoreLocked(StoreError):
    """The embedded store is open in another process."""
