"""The hot path's rows without ORM objects: Core statements on the message and step tables, and the conversions
between a `Message` and its `messages` row.

A step writes a few rows hundreds of times a second; building, flushing and refreshing ORM objects for them cost
more CPU than the database did, so `StateStore` writes these with Core statements (multi-row inserts whose
RETURNING ids come back in parameter order) and builds the stored `Message` from the one it was given.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import bindparam, func, insert, select, update
from sqlalchemy.engine import Connection

from pagemind.runtime.messages import Message
from pagemind.runtime.state.records import aware
from pagemind.runtime.state.tables.agents import AgentRow, BlockRow
from pagemind.runtime.state.tables.archival import archival_revisions
from pagemind.runtime.state.tables.conversation import MessageRow, StepRow, TurnKeyRow
from pagemind.runtime.state.tables.schema import table_of
from pagemind.tools import ToolCall


def message_from_row(row: Any) -> Message:
    """The `Message` a `messages` row (ORM object or Core row) holds."""
    calls = tuple(ToolCall(c["id"], c["name"], c["arguments"]) for c in row.tool_calls or [])
    return Message(
        role=row.role,
        content=row.content,
        created_at=aware(row.created_at),
        tool_calls=calls,
        tool_call_id=row.tool_call_id,
        name=row.name,
        is_error=row.is_error,
        id=row.id,
        turn_id=row.turn_id,
        step_id=row.step_id,
        in_context=row.in_context,
    )


messages_table = table_of(MessageRow)
steps_table = table_of(StepRow)
turn_keys_table = table_of(TurnKeyRow)
blocks_table = table_of(BlockRow)
# Built once (a statement built per call costs more CPU than running it). Multi-row insert whose RETURNING rows come
# back in the order of the parameters (ids for the messages, in order).
INSERT_MESSAGES = insert(messages_table).returning(messages_table.c.id, sort_by_parameter_order=True)
INSERT_STEP = insert(steps_table).returning(steps_table.c.id)


def values_of(agent_id: int, message: Message, step_id: int | None = None) -> dict[str, Any]:
    """The `messages` row of a message, as Core parameters (the hot path writes without ORM objects)."""
    calls = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in message.tool_calls] or None
    return {
        "agent_id": agent_id,
        "turn_id": message.turn_id,
        "step_id": step_id if step_id is not None else message.step_id,
        "role": message.role,
        "content": message.content,
        "tool_calls": calls,
        "tool_call_id": message.tool_call_id,
        "name": message.name,
        "is_error": message.is_error,
        "in_context": message.in_context,
        "created_at": message.created_at,
    }


def newest_message_ids(agent_id: Any) -> list[Any]:
    """The newest message id with `in_context` true and false, as scalar subqueries of the agent `agent_id` (a bound
    parameter, or a column to correlate with). Read per turn, so it must not grow with the log: each max is answered
    from the end of ix_messages_agent_context (a plain max walks every row)."""
    return [
        select(func.max(messages_table.c.id))
        .where(messages_table.c.agent_id == agent_id, messages_table.c.in_context == flag)
        .scalar_subquery()
        for flag in (True, False)
    ]


_NEWEST = newest_message_ids(bindparam("p_agent_id"))
NEWEST_MESSAGE_IDS = select(*_NEWEST)
# The turn's check for changes made elsewhere, in one round trip: the newest message ids and the archival
# statistics' revision (one row), with each block's label and version joined on (a row per block; one row with
# no block when the agent has none).
_NEWEST_AND_REVISION = select(
    *(newest.label(f"newest_{i}") for i, newest in enumerate(_NEWEST)),
    select(archival_revisions.c.revision)
    .where(archival_revisions.c.agent_id == bindparam("p_agent_id"))
    .scalar_subquery()
    .label("revision"),
).subquery("freshness")
FRESHNESS = select(*_NEWEST_AND_REVISION.c, blocks_table.c.label, blocks_table.c.version).select_from(
    _NEWEST_AND_REVISION.outerjoin(blocks_table, blocks_table.c.agent_id == bindparam("p_agent_id"))
)
TURN_FOR_KEY = select(turn_keys_table.c.turn_id).where(
    turn_keys_table.c.agent_id == bindparam("p_agent_id"), turn_keys_table.c.key == bindparam("p_key")
)
INSERT_TURN_KEY = insert(turn_keys_table)


@dataclass(frozen=True)
class Freshness:
    """What a turn reads first to see whether another process changed the agent since it last looked."""

    newest: int  # the newest message id (0: none)
    versions: dict[str, int]  # each block's version
    archival_revision: int  # the archival statistics' revision (0 before the first change)


def stored_message(message: Message, message_id: int, step_id: int | None) -> Message:
    """`message` as the store now holds it: its id (and step), a UTC time, and a fresh memo."""
    return dataclasses.replace(message, id=message_id, step_id=step_id, created_at=aware(message.created_at), memo={})


def insert_messages(
    conn: Connection, agent_id: int, messages: list[Message], step_id: int | None = None
) -> list[Message]:
    """Insert messages in one statement inside the caller's transaction; returns them as stored (ids in order)."""
    if not messages:
        return []
    ids = conn.execute(INSERT_MESSAGES, [values_of(agent_id, m, step_id) for m in messages]).scalars().all()
    return [stored_message(m, i, m.step_id if step_id is None else step_id) for m, i in zip(messages, ids, strict=True)]


@functools.cache
def pressure_update(columns: tuple[str, ...]) -> Any:
    """`UPDATE agents SET <columns> WHERE id = :p_agent_id`, with a bound parameter `p_<column>` for each."""
    agents = table_of(AgentRow)
    return (
        update(agents)
        .where(agents.c.id == bindparam("p_agent_id"))
        .values(**{column: bindparam(f"p_{column}") for column in columns})
    )


def freshness_of(rows: Sequence[Any]) -> Freshness:
    """The `Freshness` that the `FRESHNESS` read's rows (one per block, at least one) say."""
    *newest, revision, _, _ = rows[0]
    versions = {label: version for *_, label, version in rows if label is not None}
    return Freshness(max(value or 0 for value in newest), versions, int(revision or 0))


def rows_on(conn: Connection) -> Callable[[Any, dict[str, Any]], Awaitable[Sequence[Any]]]:
    """Runs a statement on `conn` and returns its rows, awaitably (the interface `state.agent_load` reads through)."""

    async def rows_of(statement: Any, params: dict[str, Any]) -> Sequence[Any]:
        return conn.execute(statement, params).all()

    return rows_of
