"""Built-in tools for external memory: `archival_memory_insert`, `archival_search`, `conversation_search`.

They reach the agent's stores only through `ToolContext.archival` / `ToolContext.recall`, which the runtime
scopes to the calling agent: no argument names an agent, so none can reach another agent's memories.
"""

from __future__ import annotations

from datetime import UTC, date, datetime, time
from typing import Any

from pagemind.tools.context import MEMORY_KINDS, ToolContext
from pagemind.tools.dispatch import ToolError
from pagemind.tools.registry import tool


def _when(value: str | None, end: bool = False) -> datetime | None:
    """An ISO date or date-time from the model; a bare date covers its whole day."""
    if value is None or not str(value).strip():
        return None
    text = str(value).strip()
    try:
        if len(text) == 10:
            day = date.fromisoformat(text)
            return datetime.combine(day, time.max if end else time.min, tzinfo=UTC)
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise ToolError(f"'{value}' is not a date; use YYYY-MM-DD (or an ISO date-time)") from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def _archival(context: ToolContext) -> Any:
    if context.archival is None:
        raise ToolError("archival memory is not configured for this agent")
    return context.archival


def _recall(context: ToolContext) -> Any:
    if context.recall is None:
        raise ToolError("recall memory is not available for this agent")
    return context.recall


async def _filed_from(context: ToolContext) -> list[int]:
    """The conversation a memory is filed from: the latest user and assistant messages before the call (their
    words are indexed with the memory for keyword search, never shown: `memory.filed_from`). Nothing when there
    is no message log."""
    count = _archival(context).context_messages
    if context.recall is None or count <= 0:
        return []
    return [hit.id for hit in await context.recall.search(None, roles=["user", "assistant"], limit=count)]


@tool
async def archival_memory_insert(
    content: str, context: ToolContext, tags: list[str] | None = None, importance: float | None = None
) -> str:
    """Save one lasting fact, self-contained, with names and dates ("Sam's sister Mei lives in Oslo").

    Args:
        tags: e.g. ["family"]; a kind among them (preference, progress, todo, constraint) sets it.
        importance: 0-1, default 0.5.
    """
    labels = [t for t in tags or [] if t]
    kinds = [t.lower() for t in labels if t.lower() in MEMORY_KINDS]
    kind = kinds[0] if kinds else "fact"
    review = getattr(context, "review", None)  # `memory.review`: the user approves what is remembered
    if review is not None and review.holds("archival_memory_insert"):
        try:
            await review.hold("archival_memory_insert", content, kind=kind, importance=importance, tags=labels)
        except ValueError as exc:
            raise ToolError(str(exc)) from None
        return "Held for the user's review: it is remembered once they approve it."
    try:
        result = await _archival(context).insert(
            content,
            kind=kind,
            tags=labels,
            importance=importance,
            source_message_ids=await _filed_from(context) or None,
        )
    except ValueError as exc:
        raise ToolError(str(exc)) from None
    if result.action == "duplicate":
        return f"Already known (memory {result.id[:8]}, similarity {result.similarity}): refreshed, not duplicated."
    if result.action == "superseded":
        return f"Saved as memory {result.id[:8]}; it replaces older memory {result.other_id[:8]}, kept in history."
    return f"Saved as memory {result.id[:8]} ({result.kind}): {result.text}"


@tool(read_only=True)
async def archival_search(
    query: str,
    context: ToolContext,
    tags: list[str] | None = None,
    start_date: str | None = None,
    end_date: str | None = None,
    top_k: int | None = None,
    page: int = 1,
) -> str:
    """Search archival memory by meaning and keywords. Dates: YYYY-MM-DD.

    Args:
        tags: Any of these.
    """
    hits = await _archival(context).search(
        query,
        tags=tags,
        start_date=_when(start_date),
        end_date=_when(end_date, end=True),
        top_k=top_k,
        page=max(1, page),
    )
    if not hits:
        return f"No archival memories match '{query}'" + (" on this page." if page > 1 else ".")
    lines = [f"Archival memories for '{query}' (page {page}):"]
    lines += [f"- [{h.date:%Y-%m-%d}] ({h.kind}, score {h.score:.2f}) {h.text}" for h in hits]
    return "\n".join(lines)


@tool(read_only=True)
async def conversation_search(
    context: ToolContext,
    query: str | None = None,
    roles: list[str] | None = None,
    start_date: str | None = None,
    end_date: str | None = None,
    limit: int | None = None,
    page: int = 1,
) -> str:
    """Search all past messages; no query: the latest. Dates: YYYY-MM-DD.

    Args:
        roles: Any of user, assistant, tool.
    """
    hits = await _recall(context).search(
        query,
        roles=roles,
        start_date=_when(start_date),
        end_date=_when(end_date, end=True),
        limit=limit,
        page=max(1, page),
    )
    if not hits:
        return "No messages found" + (f" for '{query}'" if query else "") + (" on this page." if page > 1 else ".")
    header = f"Messages matching '{query}'" if query else "Messages, newest first"
    lines = [f"{header} (page {page}):"]
    lines += [f"- [{h.time:%Y-%m-%d %H:%M}] {h.role}: {h.text}" for h in hits]
    return "\n".join(lines)
