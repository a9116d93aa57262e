"""What a tool may reach of the running agent. `tools/` defines it; `runtime/` supplies it.

Tools never import the kernel: they get the agent's identity, the clock and its memories through this
interface, so the dependency arrow stays `runtime → tools → blocks`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Protocol, runtime_checkable

from blocks import CoreMemory


@runtime_checkable
class ArchivalMemory(Protocol):
    """Archival memory as tools see it: already scoped to the calling agent."""

    async def insert(self, content: str, tags: list[str] | None, importance: float | None) -> Any:
        """Store a memory; returns a description of what was stored."""
        ...

    async def search(
        self,
        query: str,
        tags: list[str] | None,
        start_date: datetime | None,
        end_date: datetime | None,
        top_k: int | None,
        page: int,
    ) -> list[Any]:
        """Ranked memories for a query."""
        ...


@runtime_checkable
class RecallMemory(Protocol):
    """The agent's whole message history as tools see it: already scoped to the calling agent."""

    async def search(
        self,
        query: str | None,
        roles: list[str] | None,
        start_date: datetime | None,
        end_date: datetime | None,
        limit: int,
        page: int,
    ) -> list[Any]:
        """Matching messages, best first (or newest first without a query)."""
        ...


class ToolContext(Protocol):
    """The agent's side of a tool call. A tool asks for it with a parameter annotated `ToolContext`."""

    @property
    def agent_name(self) -> str:
        """The agent's name (its identity in every store)."""
        ...

    @property
    def core_memory(self) -> CoreMemory:
        """The working copy of the agent's core blocks for this step."""
        ...

    @property
    def archival(self) -> ArchivalMemory | None:
        """Archival memory, or None when the agent has none configured."""
        ...

    @property
    def recall(self) -> RecallMemory | None:
        """Recall memory (the message log), or None when unavailable."""
        ...

    def now(self) -> datetime:
        """The current time (a fixed clock in tests and replays)."""
        ...
