"""The durable inbox: every accepted message or job for an agent, committed before the caller is answered.

An item goes pending → running (owner, lease) → done | failed. Its `id` is the arrival order and an agent's items
run in that order, one at a time, by the one daemon that holds the agent's lease (`scheduler.queue.leases`). An
`idempotency_key` is unique per agent: a retried submission finds the first item instead of adding one. Items are
never deleted here; `result` holds what `GET /v1/runs/{id}` shows.

A message's turn runs with the idempotency key `"inbox:" + run_id` (`runtime.turn_start.begin_turn`), so an item whose
daemon died after the turn committed but before `finish` is run again and returns the stored turn: the item
completes exactly once whatever the kill point.

The item, its states and kinds are `scheduler.queue.inbox_item`; the statements run here, built once,
`scheduler.queue.inbox_statements`.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, overload

from sqlalchemy import and_, func, select, update
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError

from pagemind.runtime.crypto.columns import EncryptedJSON, EncryptedText
from pagemind.runtime.messages import Message
from pagemind.runtime.state.async_pg import AwaitedStatements
from pagemind.runtime.state.conversation.step_commit import LinkedWrite
from pagemind.runtime.state.dialects import dialect
from pagemind.runtime.state.held import read_connection, single_statement, write_transaction
from pagemind.runtime.state.records import without_nul
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.state.tables.daemon import inbox
from pagemind.scheduler.queue.inbox_item import FAILED, PENDING, InboxItem, is_open, is_running, item_from_row
from pagemind.scheduler.queue.inbox_statements import (
    CLAIM_HEAD,
    GET_ITEM,
    SELECT_ITEMS,
    InboxStatements,
    finish_parameters,
)
from pagemind.scheduler.queue.sql import DONE_CHANNEL, INBOX_CHANNEL, notify
from pagemind.scheduler.queue.wakeup import arrival_notice


@dataclass(frozen=True)
class HandOff:
    """How a submission is placed when a worker of this daemon lingers on its agent (`DaemonConfig.hand_off`): the
    item is inserted already claimed for that worker (`owner`, its lease until `until`: running, one attempt), and a
    message item's turn's user message (`message`) rides on that insert (`StateStore.accept_message`'s `after`),
    one statement instead of three (insert, claim, accept). Nothing is stored that way when an older item of the
    agent is still open (that one runs first): the item is then stored pending, as any other."""

    owner: str
    until: datetime
    store: StateStore
    message: Message | None  # None: a job, or the agent is not loaded here (its turn stores the message itself)


class Inbox:
    """Reads and writes the `inbox` table (the only code that does)."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self.awaited = AwaitedStatements.of(engine)
        self._statements = InboxStatements(engine)

    async def submit(
        self,
        agent_id: int,
        name: str,
        kind: str,
        content: str,
        key: str | None,
        now: datetime,
        source: str = "",
        *,
        announce: bool = True,
        hand_off: HandOff | None = None,
    ) -> tuple[InboxItem, bool]:
        """Add an item for agent `agent_id` (called `name`), committed on return; (the item, True), or (the first
        item with this key, False). `source` (the submitting daemon) goes with the notice, so that daemon, which
        woke itself already, can ignore it; so does the agent, which the daemon hearing it takes at once.
        `announce=False`: no notice (the submitting daemon's own worker holds the agent's lease, so no other
        daemon could take the item, and that worker is woken in process). `hand_off`: placed straight with the
        worker lingering on the agent (see `HandOff`; never announced); the item returned is then running, with
        its turn's user message as `accepted` when one was stored with it."""
        params: dict[str, Any] = {  # NUL: as the runtime's engine does for every statement
            "p_run_id": uuid.uuid4().hex,
            "p_agent_id": agent_id,
            "p_kind": kind,
            "p_content": without_nul(content),
            "p_key": without_nul(key) if key is not None else None,
            "p_now": now,
        }
        if hand_off is not None:
            statement, extra = self._statements.submit_claimed, {"p_owner": hand_off.owner, "p_until": hand_off.until}
        elif announce:
            statement, extra = self._statements.submit, {"p_source": arrival_notice(source, agent_id, name)}
        else:
            statement, extra = self._statements.submit_unannounced, {}
        accepted = None
        try:
            if hand_off is not None and hand_off.message is not None:
                claimed = LinkedWrite(statement, {**params, **extra})
                turn_key = "inbox:" + params["p_run_id"]  # `InboxItem.turn_key`
                accepted = await hand_off.store.accept_message(agent_id, hand_off.message, turn_key, after=claimed)
                row = self._opened(claimed.row)
            else:
                row = await self._one_statement(statement, {**params, **extra})
        except IntegrityError:
            if key is None:
                raise
            existing = self._one(and_(inbox.c.agent_id == agent_id, inbox.c.idempotency_key == key))
            if existing is None:  # the other insert was rolled back meanwhile: try once more
                return await self.submit(
                    agent_id, name, kind, content, key, now, source, announce=announce, hand_off=hand_off
                )
            return existing, False
        if row is None:  # a hand-off found an older open item of the agent: this one waits its turn, pending
            return await self.submit(agent_id, name, kind, content, key, now, source, announce=False)
        return replace(item_from_row(row, name), accepted=accepted), True

    @overload
    def _opened(self, row: Mapping[str, Any]) -> Mapping[str, Any]: ...
    @overload
    def _opened(self, row: None) -> None: ...
    def _opened(self, row: Mapping[str, Any] | None) -> Mapping[str, Any] | None:
        """A row a step's statement returned for a write linked to it (`LinkedWrite`): its sealed columns opened,
        as the inbox's own reads open them (encryption at rest: `runtime.crypto.columns`)."""
        if row is None:
            return None
        dialect = self.engine.dialect
        content = EncryptedText().process_result_value(row["content"], dialect)
        return {**row, "content": content, "result": EncryptedJSON().process_result_value(row["result"], dialect)}

    async def _one_statement(self, statement: Any, params: dict[str, Any]) -> Any:
        """The first row (a mapping) of a statement that is its own transaction: awaited on Postgres
        (`runtime.state.async_pg`: the event loop runs on meanwhile), on the held connection on SQLite."""
        if self.awaited is not None:
            return await self.awaited.first(statement, params, shape="mapping")
        with single_statement(self.engine) as conn:
            row = conn.execute(statement, params).first()
        return row._mapping if row is not None else None

    def submit_many(self, items: list[tuple[int, str, str, str]], now: datetime, source: str = "") -> None:
        """Add many keyed items — (agent id, kind, content, idempotency key) — in one transaction, committed on
        return; an item whose key its agent already has is left as it is. For trigger firings: a 09:00 schedule
        of 10,000 agents is one insert, not 10,000 transactions. `source` as for `submit`."""
        if not items:
            return
        rows = [
            {
                "run_id": uuid.uuid4().hex,
                "agent_id": agent_id,
                "kind": kind,
                "content": without_nul(content),
                "idempotency_key": without_nul(key),
                "state": PENDING,
                "attempts": 0,
                "created_at": now,
            }
            for agent_id, kind, content, key in items
        ]
        insert = dialect(self.engine).insert(inbox)
        with write_transaction(self.engine) as conn:
            conn.execute(
                insert.on_conflict_do_nothing(index_elements=[inbox.c.agent_id, inbox.c.idempotency_key]), rows
            )
            notify(conn, INBOX_CHANNEL, source)

    def _one(self, where: Any, conn: Connection | None = None) -> InboxItem | None:
        if conn is not None:
            row = conn.execute(SELECT_ITEMS.where(where)).first()
            return item_from_row(row) if row else None
        with read_connection(self.engine) as own:
            return self._one(where, own)

    def get(self, run_id: str) -> InboxItem | None:
        """The item with this run id, as stored now."""
        with read_connection(self.engine) as conn:
            row = conn.execute(GET_ITEM, {"p_run_id": run_id}).first()
        return item_from_row(row) if row else None

    async def read(self, run_id: str) -> InboxItem | None:
        """`get`, awaited on Postgres (a waiting caller's look at the run: the event loop runs on meanwhile)."""
        if self.awaited is None:
            return self.get(run_id)
        row = await self.awaited.first(GET_ITEM, {"p_run_id": run_id}, shape="mapping")
        return item_from_row(row) if row else None

    async def claim_next(self, agent_id: int, owner: str, lease_until: datetime, now: datetime) -> InboxItem | None:
        """Mark the agent's oldest open item running for `owner` and return it; None when the agent has none.

        One statement (`UPDATE … WHERE id = (the oldest open id) RETURNING …`). The caller holds the agent's lease,
        so no one else claims its items; an item left running by a dead owner is the oldest and is claimed again
        (its `attempts` counts every claim)."""
        row = await self._one_statement(
            CLAIM_HEAD, {"p_agent_id": agent_id, "p_owner": owner, "p_until": lease_until, "p_now": now}
        )
        return item_from_row(row) if row is not None else None

    async def finish(
        self,
        item: InboxItem,
        owner: str,
        now: datetime,
        *,
        result: dict[str, Any] | None = None,
        error: str | None = None,
    ) -> InboxItem:
        """Mark a running item done (with `result`) or failed (with `error`); an item already finished (by an
        owner that lost its lease and still ran it) keeps its first outcome. Returns the item as stored, with
        `more` (whether the agent had other open items when it finished; None if this call did not finish it)."""
        row = await self._one_statement(self._statements.finish, finish_parameters(item, owner, now, result, error))
        return self.finished(item, row)

    def finish_rider(self, item: InboxItem, owner: str, now: datetime, result: dict[str, Any]) -> LinkedWrite:
        """`finish` (done, with `result`) as a write to commit with the turn's last step
        (`runtime.turn_outcomes.EndWrite`): the same statement, in that step's transaction. `finished(item, rider.row)`
        then reads the outcome."""
        return LinkedWrite(self._statements.finish, finish_parameters(item, owner, now, result, None))

    def finished(self, item: InboxItem, row: Mapping[str, Any] | None) -> InboxItem:
        """The item as a finish returned it (`row`; None: it was finished already, so it is read as stored)."""
        if row is not None:
            return item_from_row(self._opened(row), item.agent_name)
        stored = self.get(item.run_id)
        assert stored is not None  # finished already: its row is there
        return stored

    def watch(self, run_id: str, watcher: str) -> str | None:
        """Record that daemon `watcher` streams the run's events (`scheduler.streams.relay`), and tell the daemon
        running it; returns the run's state (None if there is no such run, or it is over: then nothing is written).
        Committed on return, without waiting for the WAL flush on Postgres (a watch lost in a server crash goes with the
        stream that made it): a stream's start never waits on a busy disk."""
        with write_transaction(self.engine) as conn:
            dialect(conn).relax_commit(conn)
            row = conn.execute(self._statements.watch, {"p_run_id": run_id, "p_watcher": watcher}).first()
        return row.state if row is not None else None

    def watchers(self, run_ids: list[str]) -> dict[str, str]:
        """The watcher of each of these runs that has one."""
        if not run_ids:
            return {}
        with read_connection(self.engine) as conn:
            rows = conn.execute(
                select(inbox.c.run_id, inbox.c.watcher).where(inbox.c.run_id.in_(run_ids), inbox.c.watcher.is_not(None))
            )
            return {run_id: watcher for run_id, watcher in rows}

    def fail_open(self, agent_id: int, error: str, now: datetime) -> int:
        """Fail every open item of an agent (it was deleted); returns how many."""
        with write_transaction(self.engine) as conn:
            done = conn.execute(
                update(inbox)
                .where(inbox.c.agent_id == agent_id, is_open(inbox.c.state))
                .values(state=FAILED, error=error, finished_at=now, lease_expires_at=None)
            )
            notify(conn, DONE_CHANNEL)
            return done.rowcount

    def release(self, owner: str, item_id: int | None = None) -> int:
        """Put `owner`'s running items (or one of them) back to pending, to run again by whoever takes the agent
        (a shutdown that could not finish them, a turn that found the agent busy); returns how many."""
        where = [inbox.c.owner == owner, is_running(inbox.c.state)]
        if item_id is not None:
            where.append(inbox.c.id == item_id)
        with write_transaction(self.engine) as conn:
            released = conn.execute(update(inbox).where(*where).values(state=PENDING, lease_expires_at=None))
            notify(conn, INBOX_CHANNEL)
            return released.rowcount

    def with_open(self, agent_ids: list[int]) -> list[int]:
        """Those of `agent_ids` that have an item still to run (one query for all of them)."""
        if not agent_ids:
            return []
        with read_connection(self.engine) as conn:
            return list(
                conn.execute(
                    select(inbox.c.agent_id).where(inbox.c.agent_id.in_(agent_ids), is_open(inbox.c.state)).distinct()
                ).scalars()
            )

    def open_count(self, agent_id: int) -> int:
        """How many items the agent has still to run."""
        with read_connection(self.engine) as conn:
            return conn.execute(
                select(func.count()).where(inbox.c.agent_id == agent_id, is_open(inbox.c.state))
            ).scalar_one()

    def open_counts(self) -> dict[int, int]:
        """Open items per agent id (agents with none are left out)."""
        with read_connection(self.engine) as conn:
            rows = conn.execute(
                select(inbox.c.agent_id, func.count()).where(is_open(inbox.c.state)).group_by(inbox.c.agent_id)
            )
            return {agent_id: count for agent_id, count in rows}

    def items(self, agent_id: int | None = None) -> list[InboxItem]:
        """Every item (of one agent), oldest first: for inspection and tests, not the hot path."""
        query = SELECT_ITEMS if agent_id is None else SELECT_ITEMS.where(inbox.c.agent_id == agent_id)
        with read_connection(self.engine) as conn:
            return [item_from_row(row) for row in conn.execute(query.order_by(inbox.c.id))]
