"""Changes to one agent's archival memories already stored: a rewrite in place, a supersede, a pin, forgetting.

Each follows the ledger's order (`memory.archival.ledger`): the row first, with a write token or a state that
`memory.reconcile` can finish from, then the point in the vector store, then the token cleared. The store is
opened (and reconciled) before any row is touched. The entries are `ArchivalService`'s methods of the same names;
new memories (insert, refresh, events) are its write path.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from datetime import datetime
from typing import Any, Protocol

import numpy as np
import structlog
from sqlalchemy.engine import Engine

from pagemind.runtime.memory.archival.ledger import Ledger, new_token
from pagemind.runtime.memory.embedding.cache import write_cache_rows
from pagemind.runtime.memory.vectors.backend import AgentStore
from pagemind.runtime.memory.vectors.records import MemoryRecord, Sparse, StoredPoint
from pagemind.runtime.process.crashpoints import crash_point

log = structlog.get_logger("pagemind.archival")


class ChangeParts(Protocol):
    """What the changes use of the archival service (`memory.archival.memory.ArchivalService`)."""

    agent_id: int
    engine: Engine
    ledger: Ledger
    clock: Callable[[], datetime]

    @property
    def store(self) -> AgentStore:
        """The agent's vector store, opened (and reconciled) on first use."""

    def keyword_vectors(self, records: list[MemoryRecord]) -> list[Sparse]:
        """The keyword (sparse) vectors of records."""


class ArchivalChanges:
    """Changes to one agent's stored memories, below `ArchivalService`'s rewrite, supersede, pin and forget."""

    def __init__(self, service: ChangeParts):
        self.service = service

    def rewrite(
        self,
        memory_id: str,
        text: str,
        vector: np.ndarray,
        operation: str,
        detail: dict[str, Any],
        cache_rows: list[dict[str, Any]],
    ) -> bool:
        """Below `ArchivalService.rewrite` (blocking): row (new text, token, version), point upserted from the
        row, token cleared. A crash in between leaves a token, and the reconcile upserts the point again from the
        row (`memory.reconcile`). False when the memory is not live."""
        store = self.service.store  # opened (and reconciled) before the row is touched
        if cache_rows:
            with self.service.engine.begin() as conn:
                write_cache_rows(conn, cache_rows)
        token = new_token()
        record = self.service.ledger.begin_rewrite(memory_id, text, token, operation, detail, self.service.clock())
        if record is None:
            return False
        crash_point("archival.rewrite.pending")
        store.upsert([StoredPoint(record, vector, self.service.keyword_vectors([record])[0])])
        crash_point("archival.rewrite.upserted")
        self.service.ledger.settle([memory_id], token)
        crash_point("archival.rewrite.completed")
        log.info("archival_rewrite", agent_id=self.service.agent_id, id=memory_id, operation=operation, chars=len(text))
        return True

    async def supersede(self, memory_id: str, by: str, detail: dict[str, Any]) -> bool:
        """Mark a live memory superseded by another existing one, `detail` (a reason, who decided) in its
        'superseded' version; SQL first, then the point (a crash between: `memory.reconcile` sets the point from
        the row). False when it is not live or already superseded (nothing changes: safe to repeat)."""
        now, token = self.service.clock(), new_token()
        store = await asyncio.to_thread(lambda: self.service.store)  # opened (and reconciled) before the row is touched
        if not await asyncio.to_thread(self.service.ledger.begin_supersede, memory_id, by, token, detail, now):
            return False
        crash_point("archival.supersede.pending")
        await asyncio.to_thread(store.set_payload, memory_id, {"superseded_by": by, "updated_at": now})
        await asyncio.to_thread(self.service.ledger.settle, [memory_id], token)
        log.info("archival_supersede", agent_id=self.service.agent_id, id=memory_id, by=by, detail=detail)
        return True

    async def pin(self, memory_id: str) -> bool:
        """Pin a live memory (tag `pinned`, no expiry): never decayed, expired or superseded by reflection. SQL
        first, then the point's payload; False when it is not live."""
        token = new_token()
        store = await asyncio.to_thread(lambda: self.service.store)  # opened (and reconciled) before the row is touched
        fields = await asyncio.to_thread(self.service.ledger.begin_pin, memory_id, token, self.service.clock())
        if fields is None:
            return False
        await asyncio.to_thread(store.set_payload, memory_id, fields)
        await asyncio.to_thread(self.service.ledger.settle, [memory_id], token)
        log.info("archival_pin", agent_id=self.service.agent_id, id=memory_id)
        return True

    async def forget(self, memory_id: str) -> bool:
        """Delete one memory for real, in the ledger's order: row marked, point deleted, row and history deleted."""
        store = await asyncio.to_thread(lambda: self.service.store)  # opened (and reconciled) before the row is touched
        found = await asyncio.to_thread(self.service.ledger.begin_forget, memory_id)
        crash_point("archival.forget.pending")
        await asyncio.to_thread(store.delete, [memory_id])
        crash_point("archival.forget.point_deleted")
        await asyncio.to_thread(self.service.ledger.end_forget, memory_id)
        crash_point("archival.forget.completed")
        log.info("archival_forget", agent_id=self.service.agent_id, id=memory_id, found=found)
        return found
