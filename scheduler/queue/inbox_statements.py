"""The inbox's SQL, built once: items read with their agent's name, the claim of an agent's oldest open item, and
the submit, finish and watch statements of one dialect (`InboxStatements`), which `scheduler.queue.inbox` runs;
`scheduler.queue.arrivals` builds its lease-and-claim on `HEAD_ITEM` and `CLAIM_HEAD`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Integer, bindparam, case, exists, literal_column, or_, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.sql.elements import BindParameter

from pagemind.runtime.state.records import without_nul
from pagemind.runtime.state.tables.agents import AgentRow
from pagemind.runtime.state.tables.daemon import inbox
from pagemind.runtime.state.tables.schema import table_of
from pagemind.scheduler.queue.inbox_item import DONE, FAILED, PENDING, RUNNING, STATE_SQL, InboxItem, is_open
from pagemind.scheduler.queue.sql import DONE_CHANNEL, INBOX_CHANNEL, WATCH_CHANNEL, notifying

agents = table_of(AgentRow)


SELECT_ITEMS = select(inbox, agents.c.name).join(agents, agents.c.id == inbox.c.agent_id)  # items, with agent names
# The per-run statements, built once with bound parameters: a statement built per call costs more CPU (building
# it, then its cache key) than running it does. `p_` names: a column's own name is reserved in SET and VALUES.
GET_ITEM = SELECT_ITEMS.where(inbox.c.run_id == bindparam("p_run_id"))
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


def submit_claimed_statement() -> Any:
    """A hand-off's insert (`scheduler.queue.inbox.HandOff`): the item running, with the worker's owner and lease;
    nothing is stored when the agent has an older open item."""
    other = inbox.alias("other")
    now = bindparam("p_now", type_=inbox.c.created_at.type)
    columns = {
        "run_id": bindparam("p_run_id", type_=inbox.c.run_id.type),
        "agent_id": bindparam("p_agent_id", type_=inbox.c.agent_id.type),
        "kind": bindparam("p_kind", type_=inbox.c.kind.type),
        "content": bindparam("p_content", type_=inbox.c.content.type),
        "idempotency_key": bindparam("p_key", type_=inbox.c.idempotency_key.type),
        "state": STATE_SQL[RUNNING],
        "owner": bindparam("p_owner", type_=inbox.c.owner.type),
        "lease_expires_at": bindparam("p_until", type_=inbox.c.lease_expires_at.type),
        "attempts": literal_column("1", Integer),  # a claim counts as an attempt, as `claim_next`'s does
        "created_at": now,
        "started_at": now,
    }
    idle = ~exists().where(other.c.agent_id == bindparam("p_agent_id"), is_open(other.c.state))
    return inbox.insert().from_select(list(columns), select(*columns.values()).where(idle)).returning(*inbox.c)


class InboxStatements:
    """The submit, finish and watch statements of one dialect (on Postgres they NOTIFY from inside the statement)."""

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


def finish_parameters(
    item: InboxItem, owner: str, now: datetime, result: dict[str, Any] | None, error: str | None
) -> dict[str, Any]:
    """The parameters of the finish statement (`InboxStatements.finish`): done with `result`, or failed with
    `error`, by `owner` at `now`."""
    return {
        "p_id": item.id,
        "p_agent_id": item.agent_id,
        "p_state": FAILED if error is not None else DONE,
        "p_owner": owner,
        "p_now": now,
        "p_result": result,
        "p_error": without_nul(error) if error is not None else None,
    }
