"""An agent's steps in SQL: a turn's steps committed atomically with their messages and block edits (one statement
on Postgres, `step_commit`; a transaction on SQLite), their records read back, and the token use they sum to.
`StateStore` delegates here."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import func
from sqlalchemy import select as sql_select
from sqlalchemy.engine import Engine
from sqlmodel import col, select

from pagemind.runtime.messages import Message
from pagemind.runtime.process.crashpoints import crash_point
from pagemind.runtime.state.async_pg import AwaitedStatements
from pagemind.runtime.state.block_edits import StaleBlocks
from pagemind.runtime.state.connections import orm_session
from pagemind.runtime.state.conversation.step_commit import LinkedWrite, StepWrite, store_steps_pg, write_steps
from pagemind.runtime.state.off_loop import off_loop
from pagemind.runtime.state.records import UsageTotals
from pagemind.runtime.state.rows import steps_table
from pagemind.runtime.state.tables.conversation import StepRow


async def commit(
    engine: Engine,
    awaited: AwaitedStatements | None,
    agent_id: int,
    steps: Sequence[StepWrite],
    versions: dict[str, int] | None,
    rider: LinkedWrite | None,
) -> tuple[list[int], list[Message]]:
    """Store steps of one turn atomically, in order, each edited block only at its version in `versions` (updated
    in place to the versions written; `StaleBlocks` and nothing stored when one moved): the steps' ids and their
    stored messages. On Postgres one statement, awaited (`step_commit`)."""
    if awaited is not None:
        step_ids, stored, written = await store_steps_pg(awaited, agent_id, steps, versions, StaleBlocks, rider)
    else:
        step_ids, stored, written = await off_loop(engine, _write_steps, engine, agent_id, steps, versions, rider)
    crash_point("commit.after_commit")
    if versions is not None:
        versions.update(written)
    return step_ids, stored


def _write_steps(
    engine: Engine,
    agent_id: int,
    steps: Sequence[StepWrite],
    versions: dict[str, int] | None,
    rider: LinkedWrite | None,
) -> tuple[list[int], list[Message], dict[str, int]]:
    with engine.begin() as conn:
        return write_steps(conn, agent_id, steps, versions, rider)


def of_agent(engine: Engine, agent_id: int) -> list[StepRow]:
    """The agent's step records, oldest first."""
    with orm_session(engine) as session:
        return list(session.exec(select(StepRow).where(StepRow.agent_id == agent_id).order_by(col(StepRow.id))))


def of_turn(engine: Engine, agent_id: int, turn_id: str) -> list[StepRow]:
    """The committed steps of one turn, in order."""
    with orm_session(engine) as session:
        query = select(StepRow).where(StepRow.agent_id == agent_id, StepRow.turn_id == turn_id)
        return list(session.exec(query.order_by(col(StepRow.step_index))))


async def usage(engine: Engine, agent_id: int) -> UsageTotals:
    """The agent's token use summed over all its steps (off the event loop on Postgres)."""
    return await off_loop(engine, _usage, engine, agent_id)


def _usage(engine: Engine, agent_id: int) -> UsageTotals:
    steps = steps_table.c
    totals = sql_select(
        func.count(),
        func.coalesce(func.sum(steps.prompt_tokens), 0),
        func.coalesce(func.sum(steps.completion_tokens), 0),
        func.coalesce(func.sum(steps.cached_tokens), 0),
        func.count(steps.cached_tokens),
    ).where(steps.agent_id == agent_id)
    with engine.connect() as conn:
        row = conn.execute(totals).one()
    return UsageTotals(*(int(value) for value in row))
