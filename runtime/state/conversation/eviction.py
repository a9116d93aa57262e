"""Making room in an agent's window: eviction (messages out of the window, which stay in recall, and the new
recursive summary installed, with a `summaries` row), the summaries kept, and the window's pressure state on the
agent's row (the warning-cycle flag, the token correction factor, the summary). `StateStore` delegates here."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import update
from sqlalchemy.engine import Engine
from sqlmodel import col, select

from pagemind.runtime.state.async_pg import AwaitedStatements
from pagemind.runtime.state.connections import orm_session
from pagemind.runtime.state.held import single_statement
from pagemind.runtime.state.off_loop import off_loop
from pagemind.runtime.state.rows import pressure_update
from pagemind.runtime.state.tables.agents import AgentRow
from pagemind.runtime.state.tables.conversation import MessageRow, SummaryRow


async def evict(
    engine: Engine,
    agent_id: int,
    message_ids: list[int],
    summary: str,
    tokens_before: int,
    tokens_after: int,
    at: datetime,
) -> None:
    """Take messages out of the window and install the new summary, in one transaction, off the event loop."""
    await off_loop(engine, _evict, engine, agent_id, message_ids, summary, tokens_before, tokens_after, at)


def _evict(
    engine: Engine,
    agent_id: int,
    message_ids: list[int],
    summary: str,
    tokens_before: int,
    tokens_after: int,
    at: datetime,
) -> None:
    with orm_session(engine) as session:
        # Two UPDATEs, not a row read and written back per message: a flush commits on the user's path.
        session.exec(
            update(MessageRow)
            .where(col(MessageRow.agent_id) == agent_id, col(MessageRow.id).in_(message_ids))
            .values(in_context=False)
        )
        session.exec(
            update(AgentRow).where(col(AgentRow.id) == agent_id).values(summary=summary, pressure_warned=False)
        )
        session.add(
            SummaryRow(
                agent_id=agent_id,
                text=summary,
                evicted_count=len(message_ids),
                first_message_id=min(message_ids, default=None),
                last_message_id=max(message_ids, default=None),
                tokens_before=tokens_before,
                tokens_after=tokens_after,
                created_at=at,
            )
        )
        session.commit()


def summaries(engine: Engine, agent_id: int) -> list[SummaryRow]:
    """Every summary the agent has had, oldest first."""
    with orm_session(engine) as session:
        return list(
            session.exec(select(SummaryRow).where(SummaryRow.agent_id == agent_id).order_by(col(SummaryRow.id)))
        )


async def set_pressure_state(
    engine: Engine,
    awaited: AwaitedStatements | None,
    agent_id: int,
    *,
    warned: bool | None = None,
    correction: float | None = None,
    summary: str | None = None,
) -> None:
    """Persist those of the warning-cycle flag, the token correction factor and the summary that are given."""
    changes = {
        column: value
        for column, value in (("pressure_warned", warned), ("token_correction", correction), ("summary", summary))
        if value is not None
    }
    if not changes:
        return
    # One UPDATE (on Postgres outside a transaction, awaited: no BEGIN and COMMIT round trips, the event loop
    # free meanwhile), not a row read and written; built once per set of columns.
    statement = pressure_update(tuple(changes))
    params = {"p_agent_id": agent_id, **{f"p_{column}": value for column, value in changes.items()}}
    if awaited is not None:
        await awaited.rows(statement, params)
        return
    await off_loop(engine, _execute_alone, engine, statement, params)


def _execute_alone(engine: Engine, statement: Any, params: dict[str, Any]) -> None:
    with single_statement(engine) as conn:
        conn.execute(statement, params)
