"""The durable inbox: every accepted message or job for an agent, committed before the caller is answered.

An item goes pending → running (owner, lease) → done | failed. Its `id` is the arrival order and an agent's items
run in that order, one at a time, by the one daemon that holds the agent's lease (`scheduler.queue.leases`). An
`idempotency_key` is unique per agent: a retried submission finds the first item instead of adding one. Items are
never deleted here; `result` holds what `GET /v1/runs/{id}` shows.

A message's turn runs with the idempotency key `"inbox:" + run_id` (`runtime.loop.begin_turn`), so an item whose
daemon died after the turn committed but before `finish` is run again and returns the stored turn: the item
completes exactly once whatever the kill point.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any, overload

from sqlalchemy import Integer, String, and_, bindparam, case, exists, func, literal_column, or_, select, update
from sqlalchemy.engine import Connection, Engine, Row
from sqlalchemy.exc import IntegrityError
from sqlalchemy.sql.elements import BindParameter

from pagemind.runtime.crypto.columns import EncryptedJSON, EncryptedText
from pagemind.runtime.messages import Message
from pagemind.runtime.state.async_pg import AwaitedStatements
from pagemind.runtime.state.conversation.step_commit import LinkedWrite
from pagemind.runtime.state.dialects import dialect
from pagemind.runtime.state.held import read_connection, single_statement, write_transaction
from pagemind.runtime.state.records import aware, without_nul
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.state.tables.agents import AgentRow
from pagemind.runtime.state.tables.daemon import inbox
from pagemind.runtime.state.tables.schema import table_of
from pagemind.scheduler.queue.sql import DONE_CHANNEL, INBOX_CHANNEL, WATCH_CHANNEL, notify, notifying
from pagemind.scheduler.queue.wakeup import arrival_notice

PENDING, RUNNING, DONE, FAILED = "pending", "running", "done", "failed"
OPEN = (PENDING, RUNNING)  # an item still to run (a running one whose owner died is run again)
TERMINAL = (DONE, FAILED)
agents = table_of(AgentRow)


_STATE_SQL = {state: literal_column(f"'{state}'", String) for state in OPEN}  # constants of ours, never user input


def is_open(column: Any) -> Any:
    """`column IN ('pending', 'running')` with the states written into the SQL, for the statements built once: an IN
    over a Python list is an expanding parameter, rendered into the SQL again at every execution; and as bound
    values the planner of a prepared statement's generic plan cannot see how rare open items are, so Postgres
    scanned every finished item of the inbox (which keeps them all) to find an agent's open ones."""
    return column.in_([_STATE_SQL[state] for state in OPEN])


def is_running(column: Any) -> Any:
    """`column = 'running'`, the state written into the SQL as `is_open` writes them."""
    return column == _STATE_SQL[RUNNING]


APP_TURN = "app_turn"  # a message with the OpenAI proxy's app tools or results (`scheduler.message_turn.AppTurn`)
MESSAGE_KINDS = ("message", APP_TURN)  # the kinds run as a turn of the agent; the other is "job"


@dataclass(frozen=True)
class InboxItem:
    """One row of `inbox`, plus the agent's name."""

    id: int
    run_id: str
    agent_id: int
    agent_name: str
    kind: str  # "message" | "app_turn" | "job"
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
    watcher: str | None = None  # who streams its events: a daemon id, "*" for several (`scheduler.streams.relay`)
    more: bool | None = None  # as `finish` returned it: whether the agent had other open items then (None: unknown)
    accepted: Message | None = None  # its turn's user message, stored with it by a hand-off (`HandOff`); None: not yet

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


def item_from_row(row: Row[Any] | Mapping[str, Any], name: str | None = None) -> InboxItem:
    """An inbox row (or a returned mapping of one) as an `InboxItem`."""
    m = row._mapping if isinstance(row, Row) else row
    return InboxItem(
        id=m["id"],
        run_id=m["run_id"],
        agent_id=m["agent_id"],
        agent_name=name or m["name"],
        kind=m["kind"],
        content=m["content"],
        idempotency_key=m["idempotency_key"],
        state=m["state"],
        owner=m["owner"],
        attempts=m["attempts"],
        created_at=aware(m["created_at"]),
        started_at=_maybe(m["started_at"]),
        finished_at=_maybe(m["finished_at"]),
        result=m["result"],
        error=m["error"],
        watcher=m["watcher"],
        more=m.get("more"),
    )


def _finish_parameters(
    item: InboxItem, owner: str, now: datetime, result: dict[str, Any] | None, error: str | None
) -> dict[str, Any]:
    return {
        "p_id": item.id,
        "p_agent_id": item.agent_id,
        "p_state": FAILED if error is not None else DONE,
        "p_owner": owner,
        "p_now": now,
        "p_result": result,
        "p_error": without_nul(error) if error is not None else None,
    }


_SELECT = select(inbox, agents.c.name).join(agents, agents.c.id == inbox.c.agent_id)
# The per-run statements, built once with bound parameters: a statement built per call costs more CPU (building
# it, then its cache key) than running it does. `p_` names: a column's own name is reserved in SET and VALUES.
_GET = _SELECT.where(inbox.c.run_id == bindparam("p_run_id"))
HEAD_ITEM = (
    select(inbox.c.id)
    .where(inbox.c.agent_id == bindparam("p_agent_id"), is_open(inbox.c.state))
    .order_by(inbox.c.id)
    .limit(1)
    .scalar_subquery()
)
# The claim returns the agent's name too (the worker knows only its id): no second query, and never a stale name.
CLAIM_HEAD = (
    update(inbox)
    .where(inbox.c.id == HEAD_ITEM)
    .values(
        state=RUNNING,
        owner=bindparam("p_owner"),
        lease_expires_at=bindparam("p_until"),
        started_at=bindparam("p_now"),
        attempts=inbox.c.attempts + 1,
    )
    .returning(
        *inbox.c, select(agents.c.name).where(agents.c.id == bindparam("p_agent_id")).scalar_subquery().label("name")
    )
)


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


def submit_claimed_statement() -> Any:
    """A hand-off's insert (`HandOff`): the item running, with the worker's owner and lease; nothing is stored when
    the agent has an older open item."""
    other = inbox.alias("other")
    now = bindparam("p_now", type_=inbox.c.created_at.type)
    columns = {
        "run_id": bindparam("p_run_id", type_=inbox.c.run_id.type),
        "agent_id": bindparam("p_agent_id", type_=inbox.c.agent_id.type),
        "kind": bindparam("p_kind", type_=inbox.c.kind.type),
        "content": bindparam("p_content", type_=inbox.c.content.type),
        "idempotency_key": bindparam("p_key", type_=inbox.c.idempotency_key.type),
        "state": _STATE_SQL[RUNNING],
        "owner": bindparam("p_owner", type_=inbox.c.owner.type),
        "lease_expires_at": bindparam("p_until", type_=inbox.c.lease_expires_at.type),
        "attempts": literal_column("1", Integer),  # a claim counts as an attempt, as `claim_next`'s does
        "created_at": now,
        "started_at": now,
    }
    idle = ~exists().where(other.c.agent_id == bindparam("p_agent_id"), is_open(other.c.state))
    return inbox.insert().from_select(list(columns), select(*columns.values()).where(idle)).returning(*inbox.c)


class _Statements:
    """The submit and finish statements of one dialect (on Postgres they NOTIFY from inside the statement)."""

    def __init__(self, engine: Engine):
        insert = inbox.insert().values(
            run_id=bindparam("p_run_id"),
            agent_id=bindparam("p_agent_id"),
            kind=bindparam("p_kind"),
            content=bindparam("p_content"),
            idempotency_key=bindparam("p_key"),
            state=PENDING,
            attempts=0,
            created_at=bindparam("p_now"),
        )
        self.submit = insert.returning(*inbox.c, *notifying(engine, INBOX_CHANNEL, bindparam("p_source")))
        self.submit_unannounced = insert.returning(*inbox.c)
        self.submit_claimed = submit_claimed_statement()
        # `more`: the agent's other open items, so that its worker need not claim again to learn it has none.
        # Parameters, not correlated columns: RETURNING names the target's columns unqualified, so inside the
        # subquery `agent_id` would be the subquery's own.
        other = inbox.alias("other")
        more = exists().where(
            other.c.agent_id == bindparam("p_agent_id"), is_open(other.c.state), other.c.id != bindparam("p_id")
        )
        self.finish = (
            update(inbox)
            .where(inbox.c.id == bindparam("p_id"), is_open(inbox.c.state))
            .values(
                state=bindparam("p_state"),
                owner=bindparam("p_owner"),
                finished_at=bindparam("p_now"),
                result=bindparam("p_result", type_=inbox.c.result.type),
                error=bindparam("p_error"),
                lease_expires_at=None,
            )
            .returning(*inbox.c, more.label("more"), *notifying(engine, DONE_CHANNEL, inbox.c.run_id))
        )
        # One watcher keeps its id; a second, different one makes it "*". The notice tells the daemon running the
        # item (if one does) who watches, so it starts relaying the run's events at once.
        watcher: BindParameter[Any] = bindparam("p_watcher")
        # Only an open item: a stream of a finished run (a replay, a late GET) writes nothing and wakes nobody.
        self.watch = (
            update(inbox)
            .where(inbox.c.run_id == bindparam("p_run_id"), is_open(inbox.c.state))
            .values(
                watcher=case((or_(inbox.c.watcher.is_(None), inbox.c.watcher == watcher), watcher), else_="*"),
            )
            .returning(inbox.c.state, *notifying(engine, WATCH_CHANNEL, inbox.c.run_id + " " + watcher))
        )


class Inbox:
    """Reads and writes the `inbox` table (the only code that does)."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self.awaited = AwaitedStatements.of(engine)
        self._statements = _Statements(engine)

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
            row = conn.execute(_SELECT.where(where)).first()
            return item_from_row(row) if row else None
        with read_connection(self.engine) as own:
            return self._one(where, own)

    def get(self, run_id: str) -> InboxItem | None:
        """The item with this run id, as stored now."""
        with read_connection(self.engine) as conn:
            row = conn.execute(_GET, {"p_run_id": run_id}).first()
        return item_from_row(row) if row else None

    async def read(self, run_id: str) -> InboxItem | None:
        """`get`, awaited on Postgres (a waiting caller's look at the run: the event loop runs on meanwhile)."""
        if self.awaited is None:
            return self.get(run_id)
        row = await self.awaited.first(_GET, {"p_run_id": run_id}, shape="mapping")
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
        row = await self._one_statement(self._statements.finish, _finish_parameters(item, owner, now, result, error))
        return self.finished(item, row)

    def finish_rider(self, item: InboxItem, owner: str, now: datetime, result: dict[str, Any]) -> LinkedWrite:
        """`finish` (done, with `result`) as a write to commit with the turn's last step (`runtime.loop.EndWrite`):
        the same statement, in that step's transaction. `finished(item, rider.row)` then reads the outcome."""
        return LinkedWrite(self._statements.finish, _finish_parameters(item, owner, now, result, None))

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
        query = _SELECT if agent_id is None else _SELECT.where(inbox.c.agent_id == agent_id)
        with read_connection(self.engine) as conn:
            return [item_from_row(row) for row in conn.execute(query.order_by(inbox.c.id))]
