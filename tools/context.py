"""What a tool may reach of the running agent. `tools/` defines it; `runtime/` supplies it.

Tools never import the kernel: they get the agent's identity, the clock and its memories through this
interface, so the dependency arrow stays `runtime → tools → blocks`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal, Protocol, runtime_checkable

from pydantic import BaseModel, Field

from pagemind.blocks import CoreMemory

MEMORY_KINDS = ("fact", "preference", "progress", "todo", "episode", "constraint", "reflection")


class InsertResult(BaseModel):
    """What the write path did with a new memory."""

    action: Literal["inserted", "duplicate", "superseded"]
    id: str
    text: str
    kind: str
    other_id: str | None = Field(None, description="the copy refreshed, or the memory superseded")
    similarity: float | None = None


class ArchivalHit(BaseModel):
    """One archival search result, as tools and the CLI show it."""

    id: str
    text: str
    kind: str
    date: datetime
    score: float
    tags: list[str] = Field(default_factory=list)
    importance: float = 0.5


class RecallHit(BaseModel):
    """One message found by conversation_search."""

    id: int
    role: str
    time: datetime
    text: str
    score: float | None = None


@runtime_checkable
class ArchivalMemory(Protocol):
    """Archival memory as tools and the kernel see it: already scoped to one agent; no argument can widen it."""

    @property
    def context_messages(self) -> int:
        """How many of the latest messages an insert is filed from (their words are indexed with it; 0: none)."""
        ...

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
        """Store a memory through the write path (normalise, date, dedupe, supersede); durable on return."""
        ...

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
        """Ranked memories for a query (hybrid dense + keyword, recency, importance); each result has `text`,
        `kind` and `date`. `count_hits=False` for reads that are not a use (the runtime's prefetch); `seen=True`
        with it when the model is shown the results (they count as retrieved for decay, not as hits)."""
        ...

    def stats(self) -> tuple[int, tuple[str, ...]]:
        """(number of live memories, tags in use); cheap, for the prompt's memory statistics."""
        ...


@runtime_checkable
class RecallMemory(Protocol):
    """The agent's whole message history as tools see it: already scoped to the calling agent."""

    async def search(
        self,
        query: str | None = None,
        *,
        roles: list[str] | None = None,
        start_date: datetime | None = None,
        end_date: datetime | None = None,
        limit: int | None = None,
        page: int = 1,
    ) -> list[RecallHit]:
        """Matching messages (evicted ones included), best first, or newest first without a query."""
        ...


@runtime_checkable
class Forgetting(Protocol):
    """Forget and mute by request, as tools see it: scoped to the calling agent."""

    async def forget(self, query: str, core: CoreMemory) -> str:
        """Remove what `query` matches from every tier (core lines as edits of `core`, the step's working copy);
        what was removed, in one line that does not repeat it."""
        ...

    async def mute(self, topic: str) -> bool:
        """Mute a topic; False when it was muted already."""
        ...

    async def unmute(self, topic: str) -> bool:
        """Unmute a topic; False when it was not muted."""
        ...


class ToolContext(Protocol):
    """The agent's side of a tool call. A tool asks for it with a parameter annotated `ToolContext`."""

    @property
    def agent_name(self) -> str:
        """The agent's name (for messages; every store keys the agent by its id, so a rename keeps its memories)."""
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

    @property
    def forgetting(self) -> Forgetting | None:
        """Forget and mute by request, or None where the runtime offers neither."""
        ...

    @property
    def tool_call_id(self) -> str | None:
        """The id of the tool call being run: an idempotency key for a tool with side effects outside pagemind
        (a daemon killed mid-step redoes the step, and the model may call the tool again with the same id when the
        step is resumed from a trace; the id is stable per call). None outside a call."""
        ...

    def for_call(self, call_id: str) -> ToolContext:
        """This context for one call (`tool_call_id` set); dispatch gives each call its own."""
        ...

    def now(self) -> datetime:
        """The current time (a fixed clock in tests and replays)."""
        ...
