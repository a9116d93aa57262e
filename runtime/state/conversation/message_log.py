"""An agent's messages in SQL: stored (a turn's incoming one with its idempotency key, in one transaction), read
back (a turn's, the window's, the whole log or its tail), and repaired (synthetic tool results stored, orphans taken
out of the window). Messages are never deleted: the log is also recall memory. `StateStore` delegates here.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from sqlalchemy import func, update
from sqlalchemy.engine import Connection, Engine
from sqlmodel import col, select

from pagemind.runtime.messages import Message
from pagemind.runtime.process.crashpoints import crash_point
from pagemind.runtime.state.async_pg import AwaitedStatements
from pagemind.runtime.state.connections import one_statement, orm_session
from pagemind.runtime.state.conversation.step_commit import LinkedWrite, accept_pg
from pagemind.runtime.state.off_loop import off_loop
from pagemind.runtime.state.rows import (
    INSERT_MESSAGES,
    INSERT_TURN_KEY,
    NEWEST_MESSAGE_IDS,
    TURN_FOR_KEY,
    insert_messages,
    message_from_row,
    messages_table,
    stored_message,
    values_of,
)
from pagemind.runtime.state.tables.conversation import MessageRow

# -- storing ----------------------------------------------------------------------------------------------------


def append(engine: Engine, agent_id: int, messages: Iterable[Message]) -> list[Message]:
    """Store messages in one transaction; returns them with their ids."""
    messages = list(messages)
    with engine.begin() as conn:
        return insert_messages(conn, agent_id, messages)


async def accept(
    engine: Engine,
    awaited: AwaitedStatements | None,
    agent_id: int,
    message: Message,
    key: str | None,
    after: LinkedWrite | None,
) -> Message | None:
    """A turn's incoming message and its key stored in one transaction, after `after`'s write when given (then only
    if it wrote its row): the message as stored, or None. On Postgres one statement, awaited (`step_commit`)."""
    if awaited is not None:
        message_id = await accept_pg(awaited, agent_id, message, key, after)
    else:
        message_id = await off_loop(engine, _accept, engine, agent_id, message, key, after)
    if message_id is None:
        return None
    crash_point("accept.after_commit")
    return stored_message(message, message_id, message.step_id)


def _accept(engine: Engine, agent_id: int, message: Message, key: str | None, after: LinkedWrite | None) -> int | None:
    """The accepted message's id (None: `after` wrote no row, and so nothing was stored)."""
    with engine.begin() as conn:
        if after is not None and after.execute(conn) is None:
            return None
        return _insert_accepted(conn, agent_id, message, key)


def _insert_accepted(conn: Connection, agent_id: int, message: Message, key: str | None) -> int:
    """A turn's incoming message and, if given, its idempotency key, inside the caller's transaction (SQLite's
    accept; Postgres runs `step_commit.ACCEPT`); returns the message's id."""
    message_id: int = conn.execute(INSERT_MESSAGES, [values_of(agent_id, message)]).scalar_one()
    if key is not None:
        conn.execute(
            INSERT_TURN_KEY,
            {"agent_id": agent_id, "key": key, "turn_id": message.turn_id, "created_at": message.created_at},
        )
    crash_point("accept.before_commit")
    return message_id


async def add_turn_key(engine: Engine, agent_id: int, key: str, turn_id: str, at: datetime) -> None:
    """Record that `key` names the (already stored) turn `turn_id` (off the event loop)."""
    await off_loop(engine, _add_turn_key, engine, agent_id, key, turn_id, at)


def _add_turn_key(engine: Engine, agent_id: int, key: str, turn_id: str, at: datetime) -> None:
    with engine.begin() as conn:
        conn.execute(INSERT_TURN_KEY, {"agent_id": agent_id, "key": key, "turn_id": turn_id, "created_at": at})


async def apply_repair(engine: Engine, agent_id: int, added: list[Message], dropped_ids: list[int]) -> list[Message]:
    """Store synthetic tool results and take orphan messages out of the window, in one transaction (off the event
    loop); returns the stored results."""
    return await off_loop(engine, _apply_repair, engine, agent_id, added, dropped_ids)


def _apply_repair(engine: Engine, agent_id: int, added: list[Message], dropped_ids: list[int]) -> list[Message]:
    with engine.begin() as conn:
        stored = insert_messages(conn, agent_id, added)
        if dropped_ids:
            conn.execute(
                update(messages_table)
                .values(in_context=False)
                .where(messages_table.c.agent_id == agent_id, messages_table.c.id.in_(dropped_ids))
            )
        return stored


# -- reading ----------------------------------------------------------------------------------------------------


async def turn_for_key(engine: Engine, agent_id: int, key: str) -> str | None:
    """The turn an idempotency key started, or None (off the event loop)."""
    return await off_loop(engine, _turn_for_key, engine, agent_id, key)


def _turn_for_key(engine: Engine, agent_id: int, key: str) -> str | None:
    with one_statement(engine) as conn:
        return conn.execute(TURN_FOR_KEY, {"p_agent_id": agent_id, "p_key": key}).scalar()


def turn_messages(engine: Engine, agent_id: int, turn_id: str) -> list[Message]:
    """Every stored message of one turn, oldest first."""
    with orm_session(engine) as session:
        query = select(MessageRow).where(MessageRow.agent_id == agent_id, MessageRow.turn_id == turn_id)
        return [message_from_row(r) for r in session.exec(query.order_by(col(MessageRow.id)))]


def last_message_id(engine: Engine, agent_id: int) -> int:
    """The id of the agent's newest message (0 when it has none)."""
    with one_statement(engine) as conn:
        return max(value or 0 for value in conn.execute(NEWEST_MESSAGE_IDS, {"p_agent_id": agent_id}).one())


def in_context(engine: Engine, agent_id: int) -> list[Message]:
    """The messages currently in the agent's window, oldest first (an indexed read, never the whole log)."""
    with orm_session(engine) as session:
        query = select(MessageRow).where(MessageRow.agent_id == agent_id, MessageRow.in_context == True)  # noqa: E712 (SQL: in_context = true)
        return [message_from_row(r) for r in session.exec(query.order_by(col(MessageRow.id)))]


def count(engine: Engine, agent_id: int) -> int:
    """How many messages the agent's log holds."""
    with orm_session(engine) as session:
        return session.exec(select(func.count()).select_from(MessageRow).where(MessageRow.agent_id == agent_id)).one()


def newer_than(engine: Engine, agent_id: int, after_id: int) -> list[Message]:
    """The agent's messages newer than message `after_id`, oldest first."""
    with orm_session(engine) as session:
        query = select(MessageRow).where(MessageRow.agent_id == agent_id, col(MessageRow.id) > after_id)
        return [message_from_row(r) for r in session.exec(query.order_by(col(MessageRow.id)))]
