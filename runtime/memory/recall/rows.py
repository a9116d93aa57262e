"""The messages table as recall memory reads it: its columns, what a stored message says (its searchable text),
a row as the indexes key it or as a hit, and the roles and date range a search narrows to, in SQL or on rows
already read.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import and_
from sqlalchemy.engine import Engine

from pagemind.runtime.memory.recall.fulltext import INDEX_CHARS, IndexedMessage
from pagemind.runtime.state.tables.conversation import MessageRow
from pagemind.runtime.state.tables.schema import table_of
from pagemind.tools.context import RecallHit

MESSAGES = table_of(MessageRow)
# What recall reads of a message.
COLUMNS = (
    MESSAGES.c.id,
    MESSAGES.c.role,
    MESSAGES.c.content,
    MESSAGES.c.tool_calls,
    MESSAGES.c.name,
    MESSAGES.c.created_at,
)


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def searchable_text(role: str, content: str | None, tool_calls: Any, name: str | None) -> str:
    """What a stored message says, as recall searches it: user and assistant text, the replies sent with
    `send_message`, other tool calls and tool results (a send_message result repeats the reply: skipped)."""
    if role == "system" or (role == "tool" and name == "send_message"):
        return ""
    parts = [content or ""]
    for call in tool_calls or []:
        if call.get("name") == "send_message":
            parts.append(_send_message_text(call.get("arguments") or ""))
        else:
            parts.append(f"{call.get('name')}({call.get('arguments')})")
    return " ".join(p for p in parts if p).strip()


def _send_message_text(arguments: str) -> str:
    try:
        value = json.loads(arguments)
        return str(value.get("message", "")) if isinstance(value, dict) else str(value)
    except (json.JSONDecodeError, TypeError):
        return arguments


def read_rows(engine: Engine, query: Any) -> list[Any]:
    """Every row a query over the messages table gives."""
    with engine.connect() as conn:
        return list(conn.execute(query).all())


def indexed_message(row: Any) -> IndexedMessage:
    """A row of `COLUMNS` as the indexes key it (no context yet)."""
    # Only the beginning of a huge message is indexed (see memory.fulltext); the hit still shows all of it.
    return IndexedMessage(
        int(row.id),
        row.role,
        _aware(row.created_at),
        searchable_text(row.role, row.content, row.tool_calls, row.name)[:INDEX_CHARS],
    )


def recall_hit(row: Any) -> RecallHit:
    """A row of `COLUMNS` as a search returns it (no score yet)."""
    return RecallHit(
        id=int(row.id),
        role=row.role,
        time=_aware(row.created_at),
        text=searchable_text(row.role, row.content, row.tool_calls, row.name),
    )


def row_filters(
    agent_id: int, roles: list[str] | None, start: datetime | None, end: datetime | None, ids: list[int] | None = None
) -> Any:
    """The SQL condition for the agent's messages (or those of `ids`) of these roles in the inclusive date range."""
    clauses = [MESSAGES.c.agent_id == agent_id]
    if ids is not None:
        # By primary key: `agent_id + 0` is no indexed column, so the planner cannot pick the agent's index (SQLite
        # did, and read all of the agent's entries: ~0.9 ms instead of ~0.02 ms for 20 ids at 10,000 messages).
        clauses = [(MESSAGES.c.agent_id + 0) == agent_id, MESSAGES.c.id.in_(ids)]
    if roles:
        clauses.append(MESSAGES.c.role.in_(list(roles)))
    if start is not None:
        clauses.append(MESSAGES.c.created_at >= _utc(start))
    if end is not None:
        clauses.append(MESSAGES.c.created_at <= _utc(end))
    return and_(*clauses)


def passes_filters(row: Any, roles: list[str] | None, start: datetime | None, end: datetime | None) -> bool:
    """Whether a row read already passes the filters `row_filters` puts in SQL (roles, the inclusive date range)."""
    at = _aware(row.created_at)
    return (not roles or row.role in roles) and not (start and at < _utc(start)) and not (end and at > _utc(end))


def _utc(value: datetime) -> datetime:
    # The messages table's datetime type wants aware values; naive ones are taken as UTC.
    return value.astimezone(UTC) if value.tzinfo else value.replace(tzinfo=UTC)
