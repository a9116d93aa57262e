"""All agent state in SQL (sqlmodel), behind one object: agents, blocks and their versions here; the conversation
log (messages, eviction and summaries, steps and usage) in `state.conversation`, which `StateStore` delegates to.

A step's messages, block edits and record are written in one transaction (one statement on Postgres): all of them
or none. The tables are defined in `state.tables`; `make_engine` (state.engine) opens a database at its head.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from contextlib import AbstractAsyncContextManager
from contextlib import AbstractContextManager as ContextManager
from datetime import datetime
from typing import overload

from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, col, select

from pagemind.blocks import Block, BlockEdit
from pagemind.runtime.crypto.keys import Encryption
from pagemind.runtime.messages import Message
from pagemind.runtime.spec.agent import AgentSpec
from pagemind.runtime.state.agent_load import StoredAgent, core_of, read_unchanged, record_of, stored_block
from pagemind.runtime.state.async_pg import AwaitedStatements
from pagemind.runtime.state.block_edits import apply_edits, reset_version
from pagemind.runtime.state.connections import one_statement, orm_session
from pagemind.runtime.state.conversation import eviction, message_log, step_log
from pagemind.runtime.state.conversation.step_commit import LinkedWrite, StepWrite
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.locks import turn_lock
from pagemind.runtime.state.off_loop import off_loop
from pagemind.runtime.state.records import AgentRecord, BlockVersion, StepRecord, UsageTotals, aware, utcnow
from pagemind.runtime.state.rows import FRESHNESS, Freshness, freshness_of, rows_on
from pagemind.runtime.state.tables.agents import AgentRow, BlockRow, BlockVersionRow
from pagemind.runtime.state.tables.conversation import StepRow, SummaryRow
from pagemind.runtime.state.tables.security import purges


class AgentNameTaken(ValueError):
    """Another agent already has the name."""


class StateStore:
    """Reads and writes one database's agent state. Every public method is its own transaction."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self.awaited = AwaitedStatements.of(engine)  # Postgres: the turn's statements awaited (`state.async_pg`)

    def one_statement(self) -> ContextManager[Connection]:
        """A connection in autocommit mode for a `with` block of work that is one statement (or reads that need no
        common snapshot): the thread's held connection on Postgres, a pooled one on SQLite (`state.connections`)."""
        return one_statement(self.engine)

    @classmethod
    def open(cls, database_url: str, encryption: Encryption | None = None) -> StateStore:
        """Open (and create if needed) the database at `database_url`; with `encryption`, checked against its key
        and sealing its text with it (`state.engine.make_engine`)."""
        return cls(make_engine(database_url, encryption))

    # -- agents -------------------------------------------------------------------------------------------------

    def ensure_agent(self, spec: AgentSpec, reset_memory: bool = False) -> AgentRecord:
        """Create the agent named in `spec`, or update its spec-level fields.

        Block values in the YAML seed a new agent (or a newly added block); after that the stored value wins,
        unless `reset_memory` is set, which re-seeds every block from the YAML (recorded as a version). Two
        processes starting a new agent at once both succeed: the one whose insert loses reads the winner's row.
        """
        try:
            return self._ensure_agent(spec, reset_memory)
        except IntegrityError:  # the agent (or one of its blocks) was created by another process meanwhile
            return self._ensure_agent(spec, reset_memory)

    def _ensure_agent(self, spec: AgentSpec, reset_memory: bool) -> AgentRecord:
        with orm_session(self.engine) as session:
            row = session.exec(select(AgentRow).where(AgentRow.name == spec.name)).first()
            now = utcnow()
            if row is None:
                row = AgentRow(name=spec.name, spec_hash=spec.spec_hash(), spec_json=spec.model_dump_json())
                session.add(row)
                session.flush()
            elif row.spec_hash != spec.spec_hash():
                row.spec_hash, row.spec_json, row.updated_at = spec.spec_hash(), spec.model_dump_json(), now
            assert row.id is not None  # flushed: the database gave it its id
            self._sync_blocks(session, row.id, spec, reset_memory, now)
            if reset_memory:
                row.summary, row.pressure_warned = "", False
            session.commit()
            return record_of(row)

    def _sync_blocks(self, session: Session, agent_id: int, spec: AgentSpec, reset: bool, now: datetime) -> None:
        stored = {b.label: b for b in session.exec(select(BlockRow).where(BlockRow.agent_id == agent_id))}
        for block_spec in spec.blocks:
            row = stored.get(block_spec.label)
            if row is None:
                session.add(
                    BlockRow(
                        agent_id=agent_id,
                        label=block_spec.label,
                        value=block_spec.value,
                        char_limit=block_spec.limit,
                        description=block_spec.description,
                        read_only=block_spec.read_only,
                    )
                )
                continue
            row.char_limit, row.description, row.read_only = (
                block_spec.limit,
                block_spec.description,
                block_spec.read_only,
            )
            if reset and row.value != block_spec.value:
                session.add(reset_version(agent_id, row.label, row.value, block_spec.value, now))
                row.value, row.updated_at, row.version = block_spec.value, now, row.version + 1

    async def unchanged_agent(self, spec: AgentSpec) -> StoredAgent | None:
        """The agent's state for loading, when nothing of `spec` needs storing (`state.agent_load`); else None.
        On Postgres the three reads are awaited (`state.async_pg`)."""
        if (awaited := self.awaited) is not None:
            return await read_unchanged(lambda statement, params: awaited.rows(statement, params, shape="named"), spec)
        with self.one_statement() as conn:
            return await read_unchanged(rows_on(conn), spec)

    def agent_record(self, agent_id: int) -> AgentRecord:
        """The agent with this id, as stored now."""
        with orm_session(self.engine) as session:
            return record_of(session.get(AgentRow, agent_id))

    def get_agent(self, name: str) -> AgentRecord | None:
        """The agent called `name`, or None."""
        with orm_session(self.engine) as session:
            row = session.exec(select(AgentRow).where(AgentRow.name == name)).first()
            return record_of(row) if row else None

    def stored_spec_json(self, name: str) -> str | None:
        """The last spec an agent was run with, as JSON (to inspect an agent by name alone)."""
        with orm_session(self.engine) as session:
            row = session.exec(select(AgentRow).where(AgentRow.name == name)).first()
            return row.spec_json if row else None

    def rename_agent(self, old: str, new: str) -> AgentRecord:
        """Give the agent called `old` the name `new`. Its id stays, so everything keyed by it follows: blocks,
        messages, summaries, steps, recall and archival memory. Raises KeyError if there is no `old`, and
        `AgentNameTaken` if another agent is already called `new` (nothing is merged)."""
        with orm_session(self.engine) as session:
            row = session.exec(select(AgentRow).where(AgentRow.name == old)).first()
            if row is None:
                raise KeyError(f"no agent is called '{old}'")
            if old == new:
                return record_of(row)
            if session.exec(select(AgentRow.id).where(AgentRow.name == new)).first() is not None:
                raise AgentNameTaken(f"an agent called '{new}' already exists")
            row.name, row.updated_at = new, utcnow()
            if row.spec_json:  # the stored spec answers `pagemind run NEW`: it must name the agent NEW too
                spec = json.loads(row.spec_json)
                spec["name"] = new
                row.spec_json = json.dumps(spec)
            try:
                session.commit()
            except IntegrityError:  # taken by another process between the check and the commit
                raise AgentNameTaken(f"an agent called '{new}' already exists") from None
            return record_of(row)

    def list_agents(self) -> list[AgentRecord]:
        """Every stored agent, by name; not one being purged (`runtime.erasure`: invisible from its record on)."""
        with orm_session(self.engine) as session:
            being_purged = select(purges.c.agent_id)
            query = select(AgentRow).where(col(AgentRow.id).not_in(being_purged)).order_by(AgentRow.name)
            return [record_of(r) for r in session.exec(query)]

    # -- blocks -------------------------------------------------------------------------------------------------

    def load_blocks(self, agent_id: int, spec: AgentSpec) -> list[Block]:
        """The agent's blocks in the YAML's order, with their stored values."""
        with orm_session(self.engine) as session:
            rows = {b.label: b for b in session.exec(select(BlockRow).where(BlockRow.agent_id == agent_id))}
        return [stored_block(rows[b.label], b) for b in spec.blocks if b.label in rows]

    def load_core(self, agent_id: int, spec: AgentSpec) -> tuple[list[Block], dict[str, int]]:
        """The agent's blocks (as `load_blocks`) and the version of each, read together."""
        with orm_session(self.engine) as session:
            rows = {b.label: b for b in session.exec(select(BlockRow).where(BlockRow.agent_id == agent_id))}
        return core_of(rows, spec)

    def block_versions(self, agent_id: int) -> dict[str, int]:
        """The current version of each of the agent's blocks (a turn's cheap check for edits made elsewhere)."""
        with self.one_statement() as conn:
            return freshness_of(conn.execute(FRESHNESS, {"p_agent_id": agent_id}).all()).versions

    async def freshness(self, agent_id: int) -> Freshness:
        """`last_message_id`, `block_versions` and the archival revision in one statement: what a turn reads to
        see whether another process changed the agent since it loaded it (awaited on Postgres)."""
        if (awaited := self.awaited) is not None:
            return freshness_of(await awaited.rows(FRESHNESS, {"p_agent_id": agent_id}))
        return await off_loop(self.engine, self._freshness, agent_id)

    def _freshness(self, agent_id: int) -> Freshness:
        with self.one_statement() as conn:
            return freshness_of(conn.execute(FRESHNESS, {"p_agent_id": agent_id}).all())

    def turn_lock(
        self, agent_id: int, wait: float, label: str | int | None = None
    ) -> AbstractAsyncContextManager[None]:
        """Hold the agent's turn lock for an `async with` block, across tasks and processes (`state.locks`);
        raises `AgentBusy` after waiting `wait` seconds."""
        return turn_lock(self.engine, agent_id, wait, label)

    def block_history(self, agent_id: int, label: str | None = None) -> list[BlockVersion]:
        """Every recorded edit of the agent's blocks (or one block), oldest first."""
        with orm_session(self.engine) as session:
            query = select(BlockVersionRow).where(BlockVersionRow.agent_id == agent_id)
            if label:
                query = query.where(BlockVersionRow.label == label)
            rows = session.exec(query.order_by(col(BlockVersionRow.id))).all()
        return [
            BlockVersion(r.label, r.operation, r.old_value, r.new_value, r.step_id, aware(r.created_at)) for r in rows
        ]

    def commit_edits(self, agent_id: int, edits: list[BlockEdit], versions: dict[str, int]) -> None:
        """Store block edits made outside a turn (an operator's, through the daemon's API): no step record, the
        same compare-and-set on each block's version as a step's edits (`StaleBlocks` if one moved meanwhile)."""
        with self.engine.begin() as conn:
            written = apply_edits(conn, agent_id, None, edits, versions)
        versions.update(written)

    # -- messages (`state.conversation.message_log`) -----------------------------------------------------------

    def append_messages(self, agent_id: int, messages: Iterable[Message]) -> list[Message]:
        """Store messages durably (the inbox); returns them with their ids."""
        return message_log.append(self.engine, agent_id, messages)

    @overload
    async def accept_message(self, agent_id: int, message: Message, key: str | None = None) -> Message: ...

    @overload
    async def accept_message(
        self, agent_id: int, message: Message, key: str | None = None, *, after: LinkedWrite
    ) -> Message | None: ...

    async def accept_message(
        self, agent_id: int, message: Message, key: str | None = None, *, after: LinkedWrite | None = None
    ) -> Message | None:
        """Store a turn's incoming message and, if given, its idempotency key, in one transaction: the message as
        stored. `after`: a write of one row to commit first in that transaction (the daemon's inbox item, claimed
        for the worker lingering on the agent); the message is stored only if it wrote its row (None otherwise),
        and `after.row` gets that row. The one way a turn's message is stored, with or without the item."""
        return await message_log.accept(self.engine, self.awaited, agent_id, message, key, after)

    async def add_turn_key(self, agent_id: int, key: str, turn_id: str, at: datetime) -> None:
        """Record that `key` names the (already stored) turn `turn_id` (off the event loop)."""
        await message_log.add_turn_key(self.engine, agent_id, key, turn_id, at)

    async def turn_for_key(self, agent_id: int, key: str) -> str | None:
        """The turn an idempotency key started, or None (off the event loop)."""
        return await message_log.turn_for_key(self.engine, agent_id, key)

    def turn_messages(self, agent_id: int, turn_id: str) -> list[Message]:
        """Every stored message of one turn, oldest first."""
        return message_log.turn_messages(self.engine, agent_id, turn_id)

    def last_message_id(self, agent_id: int) -> int:
        """The id of the agent's newest message (0 when it has none): any turn, anywhere, changes it."""
        return message_log.last_message_id(self.engine, agent_id)

    def in_context_messages(self, agent_id: int) -> list[Message]:
        """The messages currently in the agent's window, oldest first (an indexed read, never the whole log)."""
        return message_log.in_context(self.engine, agent_id)

    def message_count(self, agent_id: int) -> int:
        """How many messages recall memory holds for the agent."""
        return message_log.count(self.engine, agent_id)

    def all_messages(self, agent_id: int) -> list[Message]:
        """The agent's whole history, oldest first (for inspection and export, not the hot path)."""
        return self.messages_after(agent_id, 0)

    def messages_after(self, agent_id: int, after_id: int) -> list[Message]:
        """The agent's messages newer than message `after_id`, oldest first (what a reflection reads)."""
        return message_log.newer_than(self.engine, agent_id, after_id)

    async def apply_repair(self, agent_id: int, added: list[Message], dropped_ids: list[int]) -> list[Message]:
        """Store synthetic tool results and take orphan messages out of the window, in one transaction (off the
        event loop)."""
        return await message_log.apply_repair(self.engine, agent_id, added, dropped_ids)

    # -- eviction (`state.conversation.eviction`) --------------------------------------------------------------

    async def evict(
        self, agent_id: int, message_ids: list[int], summary: str, tokens_before: int, tokens_after: int, at: datetime
    ) -> None:
        """Take messages out of the window and install the new summary, in one transaction (they stay in recall);
        run off the event loop, which other agents' turns share."""
        await eviction.evict(self.engine, agent_id, message_ids, summary, tokens_before, tokens_after, at)

    async def set_pressure_state(
        self, agent_id: int, *, warned: bool | None = None, correction: float | None = None, summary: str | None = None
    ) -> None:
        """Persist the warning-cycle flag, the token correction factor and/or the summary (a replay's restore)."""
        await eviction.set_pressure_state(
            self.engine, self.awaited, agent_id, warned=warned, correction=correction, summary=summary
        )

    def summaries(self, agent_id: int) -> list[SummaryRow]:
        """Every summary the agent has had, oldest first."""
        return eviction.summaries(self.engine, agent_id)

    # -- steps (`state.conversation.step_log`) -----------------------------------------------------------------

    async def commit_step(
        self,
        agent_id: int,
        step: StepRecord,
        messages: list[Message],
        edits: list[BlockEdit],
        versions: dict[str, int] | None = None,
    ) -> tuple[int, list[Message]]:
        """Store one step atomically (`commit_steps` with that step alone): its id and its stored messages."""
        step_ids, stored = await self.commit_steps(agent_id, [StepWrite(step, messages, edits)], versions)
        return step_ids[-1], stored

    async def commit_steps(
        self,
        agent_id: int,
        steps: Sequence[StepWrite],
        versions: dict[str, int] | None = None,
        rider: LinkedWrite | None = None,
    ) -> tuple[list[int], list[Message]]:
        """Store steps of one turn atomically, in order: their records, messages and block edits (and `rider`'s
        write, in the same transaction: `rider.row` gets its row). Returns the steps' ids and all their stored
        messages, in order.

        Each edited block is written only at the version in `versions` (the one its value was computed from);
        a stale version raises `StaleBlocks` and stores nothing. `versions` is updated in place to the versions
        written. Without `versions` the edits are written unchecked (the caller vouches for its values)."""
        return await step_log.commit(self.engine, self.awaited, agent_id, steps, versions, rider)

    def turn_steps(self, agent_id: int, turn_id: str) -> list[StepRow]:
        """The committed steps of one turn, in order."""
        return step_log.of_turn(self.engine, agent_id, turn_id)

    def steps(self, agent_id: int) -> list[StepRow]:
        """The agent's step records, oldest first."""
        return step_log.of_agent(self.engine, agent_id)

    async def usage(self, agent_id: int) -> UsageTotals:
        """The agent's token use summed over all its steps (run off the event loop on Postgres)."""
        return await step_log.usage(self.engine, agent_id)
