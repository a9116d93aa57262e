"""An inbox item: its states and kinds, the `InboxItem` a row is read into, and the open states as SQL constants.

Shared by the inbox's operations (`scheduler.queue.inbox`) and statements (`scheduler.queue.inbox_statements`),
the leases' look at the inbox heads, the dispatcher, the streams and the API's runs.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import String, literal_column
from sqlalchemy.engine import Row

from pagemind.runtime.messages import Message
from pagemind.runtime.state.records import aware

PENDING, RUNNING, DONE, FAILED = "pending", "running", "done", "failed"
OPEN = (PENDING, RUNNING)  # an item still to run (a running one whose owner died is run again)
TERMINAL = (DONE, FAILED)
# The open states as SQL constants (ours, never user input): `is_open`, `is_running`, and the hand-off's insert of
# an item already running (`scheduler.queue.inbox_statements`).
STATE_SQL = {state: literal_column(f"'{state}'", String) for state in OPEN}


def is_open(column: Any) -> Any:
    """`column IN ('pending', 'running')` with the states written into the SQL, for the statements built once: an IN
    over a Python list is an expanding parameter, rendered into the SQL again at every execution; and as bound
    values the planner of a prepared statement's generic plan cannot see how rare open items are, so Postgres
    scanned every finished item of the inbox (which keeps them all) to find an agent's open ones."""
    return column.in_([STATE_SQL[state] for state in OPEN])


def is_running(column: Any) -> Any:
    """`column = 'running'`, the state written into the SQL as `is_open` writes them."""
    return column == STATE_SQL[RUNNING]


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
