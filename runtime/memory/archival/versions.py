"""The history of an agent's archival memories: one row of `archival_memory_versions` per change to a memory.

Each version names its operation ('insert', 'refresh', 'superseded', 'pin', a rewrite's own such as 'faded'),
the memory's text it applies to, a detail, and when. The ledger writes a version in the transaction of the change
it records (`memory.archival.ledger`), and deletes a memory's history with its row when the memory is forgotten.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel
from sqlalchemy import delete, select
from sqlalchemy.engine import Connection, Engine

from pagemind.runtime.state.records import aware
from pagemind.runtime.state.tables.archival import archival_memory_versions as versions


class MemoryVersion(BaseModel):
    """One entry of a memory's history."""

    memory_id: str
    operation: str
    text: str
    detail: dict[str, Any]
    at: datetime


def add_version(
    conn: Connection, agent_id: int, memory_id: str, operation: str, text: str, detail: dict[str, Any], at: datetime
) -> None:
    """Record one change of the agent's memory, in `conn`'s transaction (the change's own)."""
    conn.execute(
        versions.insert(),
        [
            {
                "agent_id": agent_id,
                "memory_id": memory_id,
                "operation": operation,
                "text": text,
                "detail": detail,
                "at": at,
            }
        ],
    )


def drop_history(conn: Connection, agent_id: int, memory_id: str) -> None:
    """Delete every version of the agent's memory, in `conn`'s transaction."""
    conn.execute(delete(versions).where(versions.c.agent_id == agent_id, versions.c.memory_id == memory_id))


def read_history(engine: Engine, agent_id: int, memory_id: str) -> list[MemoryVersion]:
    """Every recorded change of one of the agent's memories, oldest first."""
    with engine.connect() as conn:
        rows = (
            conn.execute(
                select(versions)
                .where(versions.c.agent_id == agent_id, versions.c.memory_id == memory_id)
                .order_by(versions.c.id)
            )
            .mappings()
            .all()
        )
    return [
        MemoryVersion(
            memory_id=r["memory_id"],
            operation=r["operation"],
            text=r["text"],
            detail=r["detail"] or {},
            at=aware(r["at"]),
        )
        for r in rows
    ]
