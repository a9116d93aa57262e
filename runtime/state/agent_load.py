"""An agent's stored state, read for loading in three statements when its definition is unchanged.

Loading an agent took nine round trips on Postgres: `StateStore.ensure_agent` (the agent, its blocks, and a
transaction to write what the spec changed, even when nothing had), then the window (the newest message ids, the
messages in context, the message count) and the blocks again with their versions. A daemon loads an agent at
its user's first message after a while away, so at 10 ms of CPU a load it weighed on every session of every
user. Here, when the stored agent matches the spec (same fingerprint, every block there with the spec's limit,
description and read-only flag), nothing needs writing, and the same state comes from three reads on one
connection: the agent with its newest message ids and message count, its blocks, the messages in context. In
that order: the newest id is read before the messages, as `Window.load` does, so that a message stored meanwhile
reads as "stale" at the turn's check, never as lost. Otherwise (a new agent, a changed spec, a reset) the caller
takes the writing path.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from sqlalchemy import bindparam, func, select

from pagemind.blocks import Block
from pagemind.runtime.messages import Message
from pagemind.runtime.state.records import AgentRecord, aware
from pagemind.runtime.state.rows import blocks_table, message_from_row, messages_table, newest_message_ids
from pagemind.runtime.state.tables.agents import AgentRow
from pagemind.runtime.state.tables.schema import table_of

if TYPE_CHECKING:
    from pagemind.runtime.spec.agent import AgentSpec, BlockSpec

agents_table = table_of(AgentRow)


# One row: the agent, its newest message id in and out of context, and how many messages recall holds.
AGENT_AND_LOG = select(
    agents_table,
    *(newest.label(f"newest_{i}") for i, newest in enumerate(newest_message_ids(agents_table.c.id))),
    select(func.count())
    .select_from(messages_table)
    .where(messages_table.c.agent_id == agents_table.c.id)
    .scalar_subquery()
    .label("message_count"),
).where(agents_table.c.name == bindparam("p_name"))
BLOCKS = select(blocks_table).where(blocks_table.c.agent_id == bindparam("p_agent_id"))
IN_CONTEXT = (
    select(messages_table)
    .where(messages_table.c.agent_id == bindparam("p_agent_id"), messages_table.c.in_context.is_(True))
    .order_by(messages_table.c.id)
)


def record_of(row: Any) -> AgentRecord:
    """The `AgentRecord` an `agents` row (ORM object or Core row) holds."""
    return AgentRecord(
        row.id,
        row.name,
        row.spec_hash,
        row.summary,
        aware(row.created_at),
        aware(row.updated_at),
        row.pressure_warned,
        row.token_correction,
        row.owner,
    )


def stored_block(row: Any, spec: BlockSpec) -> Block:
    """A stored block with what only its definition knows (its schema, whether it is ephemeral)."""
    return Block(
        row.label, row.value, row.char_limit, row.description, row.read_only, spec.block_schema(), spec.ephemeral
    )


def core_of(rows: dict[str, Any], spec: AgentSpec) -> tuple[list[Block], dict[str, int]]:
    """The blocks of `spec` that `rows` (block rows by label) hold, in the spec's order, and each one's version."""
    ordered = [(rows[block.label], block) for block in spec.blocks if block.label in rows]
    return [stored_block(row, block) for row, block in ordered], {row.label: row.version for row, _ in ordered}


@dataclass(frozen=True)
class StoredAgent:
    """What loading an agent reads: its record, its blocks in the spec's order with their versions, and its window's
    state (the newest message id, the message count, the messages in context, oldest first)."""

    record: AgentRecord
    blocks: list[Block]
    versions: dict[str, int]
    newest: int
    message_count: int
    messages: list[Message]


Rows = Callable[[Any, dict[str, Any]], Awaitable[Sequence[Any]]]
"""Runs one statement and returns its rows, each with its columns as attributes (SQLAlchemy's rows, or psycopg's
named tuples): each read is its own snapshot."""


async def read_unchanged(rows_of: Rows, spec: AgentSpec) -> StoredAgent | None:
    """The stored state of the agent `spec` defines, or None when the agent does not exist yet or its stored
    definition differs from `spec` (see the module docstring); read through `rows_of`."""
    found = await rows_of(AGENT_AND_LOG, {"p_name": spec.name})
    agent = found[0] if found else None
    if agent is None or agent.spec_hash != spec.spec_hash():
        return None
    rows = {row.label: row for row in await rows_of(BLOCKS, {"p_agent_id": agent.id})}
    if not all(_matches(rows.get(block.label), block) for block in spec.blocks):
        return None
    messages = [message_from_row(row) for row in await rows_of(IN_CONTEXT, {"p_agent_id": agent.id})]
    blocks, versions = core_of(rows, spec)
    return StoredAgent(
        record_of(agent), blocks, versions, max(agent.newest_0 or 0, agent.newest_1 or 0), agent.message_count, messages
    )


def _matches(row: Any, spec: BlockSpec) -> bool:
    """Whether the stored block needs no write for `spec` (what `StateStore.ensure_agent` would set is set)."""
    return row is not None and (row.char_limit, row.description, row.read_only) == (
        spec.limit,
        spec.description,
        spec.read_only,
    )
