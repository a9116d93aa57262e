"""The durable inbox: every accepted message or job for an agent, committed before the caller is answered.

An item goes pending → running (owner, lease) → done | failed. Its `id` is the arrival order and an agent's items
run in that order, one at a time, by the one daemon that holds the agent's lease (`scheduler.leases`). An
`idempotency_key` is unique per agent: a retried submission finds the first item instead of adding one. Items are
never deleted here; `result` holds what `GET /v1/runs/{id}` shows.

A message's turn runs with the idempotency key `"inbox:" + run_id` (`runtime.loop.begin_turn`), so an item whose
daemon died after the turn committed but before `finish` is run again and returns the stored turn: the item
completes exactly once whatever the kill point.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import and_, func, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import Connection, Engine, Row
from sqlalchemy.exc import IntegrityError

from pagemind.runtime.state.records import aware, without_nul
from pagemind.runtime.state.tables import AgentRow, inbox
from pagemind.scheduler.sql import (DONE_CHANNEL, INBOX_CHANNEL, notify, notifying, read_connection,
                                    single_statement, write_transaction)

PENDING, RUNNING, DONE, FAILED = "pending", "running", "done", "failed"
OPEN = (PENDING, RUNNING)  # an item still to run (a running one whose owner died is run again)
TERMINAL = (DONE, FAILED)
agents = AgentRow.__table__


@dataclass(frozen=True)
class InboxItem:
    """One row of `inbox`, plus the agent's name."""

    id: int
    run_id: str
    agent_id: int
    agent_name: str
    kind: str  # "message" | "job"
    content: str
    idempotency_key: str | None
    state: str  # pending | running | done | failed
    owner: str | None
    attempts: int
    created_at: datetime
    started_at: datetime | None
    finished_at: datetime | None
    result: dict[str, Any] | None  # {"reply", "stop_reason", "steps", "turn_id"}, or a job's
    error: str | None

    @property
    def finished(self) -> bool:
        """Whether the item is done or failed (nothing more will happen to it)."""
        return self.state in TERMINAL

    @property
    def turn_key(self) -> str:
        """The idempotency key its turn runs with: a re-run after a crash completes the turn, never doubles it."""
        return "inbox:" + self.run_id


def _maybe(value: datetime | None) -> datetime | None:
    return aware(value) if value is not None else None


def _item(row: Row, name: str | None = None) -> InboxItem:
    m = row._mapping
    return InboxItem(
        id=m["id"], run_id=m["run_id"], agent_id=m["agent_id"], agent_name=name or m["name"], kind=m["kind"],
        content=m["content"], idempotency_key=m["idempotency_key"], state=m["state"], owner=m["owner"],
        attempts=m["attempts"], created_at=aware(m["created_at"]), started_at=_maybe(m["started_at"]),
        finished_at=_maybe(m["finished_at"]), result=m["result"], error=m["error"],
    )


_SELECT = select(inbox, agents.c.name).join(agents, agents.c.id == inbox.c.agent_id)


class Inbox:
    """Reads and writes the `inbox` table (the only code that does)."""

    def __init__(self, engine: Engine):
        self.engine = engine

    def submit(self, agent_id: int, name: str, kind: str, content: str, key: str | None,
               now: datetime, source: str = "") -> tuple[InboxItem, bool]:
        """Add an item for agent `agent_id` (called `name`), committed on return; (the item, True), or (the first
        item with this key, False). `source` (the submitting daemon) goes with the notice, so that daemon, which
        woke itself already, can ignore it."""
        try:
            with single_statement(self.engine) as conn:
                row = conn.execute(inbox.insert().values(  # NUL: as the runtime's engine does for every statement
                    run_id=uuid.uuid4().hex, agent_id=agent_id, kind=kind, content=without_nul(content),
                    idempotency_key=without_nul(key) if key is not None else None,
                    state=PENDING, attempts=0, created_at=now)
                    .returning(*inbox.c, *notifying(self.engine, INBOX_CHANNEL, source))).one()
        except IntegrityError:
            if key is None:
                raise
            existing = self._one(and_(inbox.c.agent_id == agent_id, inbox.c.idempotency_key == key))
            if existing is None:  # the other insert was rolled back meanwhile: try once more
                return self.submit(agent_id, name, kind, content, key, now, source)
            return existing, False
        return _item(row, name), True

    def submit_many(self, items: list[tuple[int, str, str, str]], now: datetime, source: str = "") -> None:
        """Add many keyed items — (agent id, kind, content, idempotency key) — in one transaction, committed on
        return; an item whose key its agent already has is left as it is. For trigger firings: a 09:00 schedule
        of 10,000 agents is one insert, not 10,000 transactions. `source` as for `submit`."""
        if not items:
            return
        rows = [{"run_id": uuid.uuid4().hex, "agent_id": agent_id, "kind": kind, "content": without_nul(content),
                 "idempotency_key": without_nul(key), "state": PENDING, "attempts": 0, "created_at": now}
                for agent_id, kind, content, key in items]
        insert = (postgresql.insert if self.engine.dialect.name == "postgresql" else sqlite.insert)(inbox)
        with write_transaction(self.engine) as conn:
            conn.execute(insert.on_conflict_do_nothing(index_elements=[inbox.c.agent_id, inbox.c.idempotency_key]),
                         rows)
            notify(conn, INBOX_CHANNEL, source)

    def _one(self, where: Any, conn: Connection | None = None) -> InboxItem | None:
        if conn is not None:
            row = conn.execute(_SELECT.where(where)).first()
            return _item(row) if row else None
        with read_connection(self.engine) as own:
            return self._one(where, own)

    def get(self, run_id: str) -> InboxItem | None:
        """The item with this run id, as stored now."""
        return self._one(inbox.c.run_id == run_id)

    def claim_next(self, agent_id: int, name: str, owner: str, lease_until: datetime,
                   now: datetime) -> InboxItem | None:
        """Mark the agent's oldest open item running for `owner` and return it; None when the agent has none.

        One statement (`UPDATE … WHERE id = (the oldest open id) RETURNING …`). The caller holds the agent's lease,
        so no one else claims its items; an item left running by a dead owner is the oldest and is claimed again
        (its `attempts` counts every claim)."""
        head = (select(inbox.c.id).where(inbox.c.agent_id == agent_id, inbox.c.state.in_(OPEN))
                .order_by(inbox.c.id).limit(1).scalar_subquery())
        with single_statement(self.engine) as conn:
            row = conn.execute(update(inbox).where(inbox.c.id == head).values(
                state=RUNNING, owner=owner, lease_expires_at=lease_until, started_at=now,
                attempts=inbox.c.attempts + 1).returning(*inbox.c)).first()
        return _item(row, name) if row is not None else None

    def finish(self, item: InboxItem, owner: str, now: datetime, *, result: dict[str, Any] | None = None,
               error: str | None = None) -> InboxItem:
        """Mark a running item done (with `result`) or failed (with `error`); an item already finished (by an
        owner that lost its lease and still ran it) keeps its first outcome. Returns the item as stored."""
        with single_statement(self.engine) as conn:
            row = conn.execute(update(inbox).where(inbox.c.id == item.id, inbox.c.state.in_(OPEN)).values(
                state=FAILED if error is not None else DONE, owner=owner, finished_at=now, result=result,
                error=without_nul(error) if error is not None else None, lease_expires_at=None)
                .returning(*inbox.c, *notifying(self.engine, DONE_CHANNEL, inbox.c.run_id))).first()
        return _item(row, item.agent_name) if row is not None else self.get(item.run_id)  # type: ignore[return-value]

    def fail_open(self, agent_id: int, error: str, now: datetime) -> int:
        """Fail every open item of an agent (it was deleted); returns how many."""
        with write_transaction(self.engine) as conn:
            done = conn.execute(update(inbox).where(inbox.c.agent_id == agent_id, inbox.c.state.in_(OPEN))
                                .values(state=FAILED, error=error, finished_at=now, lease_expires_at=None))
            notify(conn, DONE_CHANNEL)
            return done.rowcount

    def release(self, owner: str, item_id: int | None = None) -> int:
        """Put `owner`'s running items (or one of them) back to pending, to run again by whoever takes the agent
        (a shutdown that could not finish them, a turn that found the agent busy); returns how many."""
        where = [inbox.c.owner == owner, inbox.c.state == RUNNING]
        if item_id is not None:
            where.append(inbox.c.id == item_id)
        with write_transaction(self.engine) as conn:
            released = conn.execute(update(inbox).where(*where).values(state=PENDING, lease_expires_at=None))
            notify(conn, INBOX_CHANNEL)
            return released.rowcount

    def has_open(self, agent_id: int) -> bool:
        """Whether the agent has an item still to run."""
        with read_connection(self.engine) as conn:
            return conn.execute(select(inbox.c.id).where(inbox.c.agent_id == agent_id, inbox.c.state.in_(OPEN))
                                .limit(1)).first() is not None

    def open_count(self, agent_id: int) -> int:
        """How many items the agent has still to run."""
        with read_connection(self.engine) as conn:
            return conn.execute(select(func.count()).where(inbox.c.agent_id == agent_id, inbox.c.state.in_(OPEN))
                                ).scalar_one()

    def open_counts(self) -> dict[int, int]:
        """Open items per agent id (agents with none are left out)."""
        with read_connection(self.engine) as conn:
            rows = conn.execute(select(inbox.c.agent_id, func.count()).where(inbox.c.state.in_(OPEN))
                                .group_by(inbox.c.agent_id))
            return {agent_id: count for agent_id, count in rows}

    def items(self, agent_id: int | None = None) -> list[InboxItem]:
        """Every item (of one agent), oldest first: for inspection and tests, not the hot path."""
        query = _SELECT if agent_id is None else _SELECT.where(inbox.c.agent_id == agent_id)
        with read_connection(self.engine) as conn:
            return [_item(row) for row in conn.execute(query.order_by(inbox.c.id))]
