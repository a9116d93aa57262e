"""Human review of what is remembered (`memory.review`): memories held as pending until a person decides.

    queue = ReviewQueue(agent_id, engine, archival, spec.memory.review)
    if queue.holds("extraction"): await queue.hold("extraction", text, kind="fact")
    queue.pending()                                       # what waits, oldest first
    await queue.approve(review_id, pin=True, text=None)   # written through the archival write path (and pinned)
    await queue.reject(review_id)                         # gone, no byte left (secure delete)

A pending memory is a row of `memory_reviews` only: no archival row, no vector point, so it is neither searched nor
prefetched, whatever the search. Approving writes it as the write path would have (dedupe, supersede; a
reflection's memory under its derived id, then what it supersedes); `edit` changes its text before that.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from datetime import datetime

import structlog
from pydantic import BaseModel, Field
from sqlalchemy import delete, select, update
from sqlalchemy.engine import Connection, Engine

from pagemind.runtime.memory.archival.memory import ArchivalService
from pagemind.runtime.memory.vectors.records import MemoryRecord
from pagemind.runtime.spec.review import ReviewConfig
from pagemind.runtime.state.records import utcnow
from pagemind.runtime.state.secure_delete import securely
from pagemind.runtime.state.tables.memory import memory_reviews
from pagemind.tools.context import MEMORY_KINDS

log = structlog.get_logger("pagemind.review")


class PendingMemory(BaseModel):
    """A memory waiting for review."""

    id: str
    origin: str = Field(description="who proposed it: extraction, reflection or archival_memory_insert")
    text: str
    kind: str
    importance: float | None = None
    tags: list[str] = Field(default_factory=list)
    supersedes: str | None = Field(None, description="the memory it supersedes once approved (a done todo)")
    created_at: datetime


class ReviewQueue:
    """The agent's memories held for review, and the decisions on them."""

    def __init__(
        self,
        agent_id: int,
        engine: Engine,
        archival: ArchivalService | None,
        config: ReviewConfig,
        clock: Callable[[], datetime] = utcnow,
    ) -> None:
        self.agent_id = agent_id
        self.engine = engine
        self.archival = archival
        self.config = config
        self.clock = clock

    def holds(self, origin: str) -> bool:
        """Whether writes of this origin wait for review (and there is archival memory to write them to)."""
        return self.archival is not None and self.config.holds(origin)

    async def hold(
        self,
        origin: str,
        text: str,
        *,
        kind: str = "fact",
        importance: float | None = None,
        tags: Sequence[str] = (),
        source_message_ids: Sequence[int] = (),
        review_id: str | None = None,
        supersedes: str | None = None,
    ) -> str:
        """Hold a memory as pending; its review id (`review_id`, derived by the caller, stores it once)."""
        text = " ".join(text.split())
        if not text:
            raise ValueError("the memory is empty")
        if kind not in MEMORY_KINDS:
            raise ValueError(f"unknown kind '{kind}'")
        row = {
            "id": review_id or str(uuid.uuid4()),
            "agent_id": self.agent_id,
            "origin": origin,
            "text": text,
            "kind": kind,
            "importance": importance,
            "tags": sorted({t.strip().lower() for t in tags if t.strip()}),
            "source_message_ids": list(source_message_ids),
            "supersedes": supersedes,
            "created_at": self.clock(),
        }
        with self.engine.begin() as conn:
            if conn.execute(select(memory_reviews.c.id).where(memory_reviews.c.id == row["id"])).first() is None:
                conn.execute(memory_reviews.insert(), [row])
        log.info("memory_held_for_review", agent_id=self.agent_id, origin=origin, kind=kind)
        return str(row["id"])

    def pending(self) -> list[PendingMemory]:
        """What waits for review, oldest first."""
        query = select(memory_reviews).where(memory_reviews.c.agent_id == self.agent_id)
        with self.engine.connect() as conn:
            rows = conn.execute(query.order_by(memory_reviews.c.created_at, memory_reviews.c.id)).mappings().all()
        return [PendingMemory.model_validate(dict(row)) for row in rows]

    def resolve(self, prefix: str) -> PendingMemory | None:
        """The pending memory whose id starts with `prefix` (unique), or None."""
        found = [p for p in self.pending() if p.id.startswith(prefix.strip().lower())]
        return found[0] if len(found) == 1 and prefix.strip() else None

    def edit(self, review_id: str, text: str) -> bool:
        """Change a pending memory's text before it is approved; False when there is no such pending memory."""
        text = " ".join(text.split())
        if not text:
            raise ValueError("the memory is empty")
        with self.engine.begin() as conn:
            where = (memory_reviews.c.agent_id == self.agent_id, memory_reviews.c.id == review_id)
            return bool(conn.execute(update(memory_reviews).where(*where).values(text=text)).rowcount)

    async def approve(self, review_id: str, *, pin: bool = False, text: str | None = None) -> str | None:
        """Write the pending memory through the archival write path (pinned with `pin`); the memory's id, or None
        when there is no such pending memory."""
        item = next((p for p in self.pending() if p.id == review_id), None)
        if item is None or self.archival is None:
            return None
        if text is not None:
            self.edit(review_id, text)
            item = item.model_copy(update={"text": " ".join(text.split())})
        memory_id = await self._write(self.archival, item)
        if item.supersedes:
            note = {"reason": "approved", "review_id": item.id, "action": "done"}
            await self.archival.supersede(item.supersedes, memory_id, note)
        if pin:
            await self.archival.pin(memory_id)
        self._drop(review_id)
        log.info("memory_approved", agent_id=self.agent_id, origin=item.origin, pinned=pin)
        return memory_id

    async def _write(self, archival: ArchivalService, item: PendingMemory) -> str:
        if item.origin == "reflection":  # under its derived id, as given (the plan decided: no dedupe)
            now = self.clock()
            record = MemoryRecord(
                id=item.id,
                agent_id=self.agent_id,
                text=item.text,
                kind=item.kind,
                importance=item.importance if item.importance is not None else archival.config.default_importance,
                tags=item.tags,
                created_at=now,
                updated_at=now,
            )
            return (await archival.insert_event(record, {"reason": "approved", "origin": item.origin})).id
        result = await archival.insert(item.text, kind=item.kind, tags=item.tags, importance=item.importance)
        return result.id

    def reject(self, review_id: str) -> bool:
        """Drop a pending memory (no byte of it left: SQLite's secure delete, the WAL truncated); False when there is
        none."""
        found = self._drop(review_id)
        log.info("memory_rejected", agent_id=self.agent_id, found=found)
        return found

    def _drop(self, review_id: str) -> bool:
        def work(conn: Connection) -> bool:
            where = (memory_reviews.c.agent_id == self.agent_id, memory_reviews.c.id == review_id)
            return bool(conn.execute(delete(memory_reviews).where(*where)).rowcount)

        return securely(self.engine, work)  # the WAL frames that held the row go too
