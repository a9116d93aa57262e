"""`RecordingArchival`: an archival memory that keeps what it is given and finds nothing."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pagemind.tools.context import ArchivalHit, InsertResult


class RecordingArchival:
    """An `ArchivalMemory` that keeps what it is asked to insert and finds nothing: for testing what the runtime
    sends to archival memory (the write path itself is tested with the real service).

    Each insert is kept in `inserted` as a dict of the content and the arguments given (those left unset are
    left out)."""

    context_messages = 2  # as the real service's default (`memory.archival.context_messages`)

    def __init__(self) -> None:
        self.inserted: list[dict[str, Any]] = []

    async def insert(
        self,
        content: str,
        *,
        kind: str = "fact",
        tags: list[str] | None = None,
        importance: float | None = None,
        source_message_ids: list[int] | None = None,
        expires_at: datetime | None = None,
    ) -> InsertResult:
        """Keep the memory; it is always new."""
        given = {
            "tags": tags,
            "importance": importance,
            "source_message_ids": source_message_ids,
            "expires_at": expires_at,
        }
        self.inserted.append({"content": content, "kind": kind, **{k: v for k, v in given.items() if v is not None}})
        return InsertResult(action="inserted", id=str(len(self.inserted)), text=content, kind=kind)

    async def search(
        self,
        query: str,
        *,
        tags: list[str] | None = None,
        start_date: datetime | None = None,
        end_date: datetime | None = None,
        top_k: int | None = None,
        page: int = 1,
        count_hits: bool = True,
        seen: bool = False,
    ) -> list[ArchivalHit]:
        """Nothing is ever found."""
        return []

    def stats(self) -> tuple[int, tuple[str, ...]]:
        """(memories inserted, no tags)."""
        return len(self.inserted), ()
