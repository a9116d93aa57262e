"""A step's commit on Postgres as one statement: its record, its messages and its block edits in one round trip
(and a held step's before it: `StepWrite`, `runtime.loop`).

`StateStore.commit_step` on SQLite runs a transaction of three to five statements (the step, its messages, the
block versions, an UPDATE per edited block). On Postgres each of those is a round trip and a statement for
SQLAlchemy to execute, with a BEGIN riding on the first and a COMMIT after the last: a daemon spent ~20 % of its CPU
per step there. Here the whole step is one statement with data-modifying CTEs, run on an autocommit connection
(the statement is its own transaction), awaited (`state.async_pg`): all of it is stored, or none.

The block edits keep their compare-and-set: each edited block is updated only at the version its value was
computed from, and when fewer blocks were updated than were edited, a CTE whose value the step's insert filters on
fails the statement (a cast of 'stale blocks' to an integer), so nothing is stored; `StaleBlocks` is raised as
before. (Filtered on, not merely selected from: a CTE's column that nothing reads is never computed.)
Several edits of one block in a commit (in one step, or in a held step and the next) are one UPDATE here (its last
value, its version moved by the number of edits), which is what the edits applied one by one leave; each edit's
`block_versions` row keeps its own step.

A turn's incoming message is stored by one statement too (`ACCEPT`), alone or gated on another write of one row
that it commits with (`LinkedWrite`: the daemon's submission for an agent whose worker lingers for it inserts the
inbox item claimed for that worker, and the message rides on that insert: `StateStore.accept_message`'s `after`).
Likewise another write can ride on a commit of steps (`rider`, in the same statement: the daemon's inbox finish
with a turn's last step, `scheduler.message_turn`), so the turn's end and its item's are one commit.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy.engine import Connection
from sqlalchemy.exc import DataError
from sqlalchemy.sql.dml import UpdateBase

from pagemind.blocks import BlockEdit
from pagemind.runtime.crypto.cipher import TextCipher
from pagemind.runtime.crypto.columns import cipher_of, seal_text
from pagemind.runtime.messages import Message
from pagemind.runtime.process.crashpoints import crash_point
from pagemind.runtime.state.async_pg import AwaitedStatements
from pagemind.runtime.state.block_edits import PG_BLOCK_UPDATES, PG_BLOCK_VERSIONS, apply_edits
from pagemind.runtime.state.records import StepRecord, without_nul
from pagemind.runtime.state.rows import INSERT_STEP, insert_messages, stored_message

STALE = "stale blocks"  # the text whose cast to an integer fails the statement when a block's version moved

_STEPS = """step AS (
  INSERT INTO steps (agent_id, turn_id, step_index, model, prompt_tokens, completion_tokens, stop_reason, started_at,
                     model_ms, total_ms, cached_tokens)
  SELECT %(agent_id)s, s.turn_id, s.step_index, s.model, s.prompt_tokens, s.completion_tokens, s.stop_reason,
         s.started_at, s.model_ms, s.total_ms, s.cached_tokens
  FROM {gate}json_to_recordset(%(steps)s::json) AS s(ord int, turn_id text, step_index int, model text,
       prompt_tokens int, completion_tokens int, stop_reason text, started_at timestamptz, model_ms float8,
       total_ms float8, cached_tokens int){where}
  ORDER BY s.ord
  RETURNING id, step_index)"""
# Each message joins its step by the step's index (distinct among the steps of one commit, all of one turn).
_MESSAGES = """, msgs AS (
  INSERT INTO messages (agent_id, turn_id, step_id, role, content, tool_calls, tool_call_id, name, is_error,
                        in_context, created_at)
  SELECT %(agent_id)s, m.turn_id, step.id, m.role, m.content, m.tool_calls, m.tool_call_id, m.name, m.is_error,
         m.in_context, m.created_at
  FROM step JOIN json_to_recordset(%(messages)s::json) AS m(ord int, step_index int, turn_id text, role text,
       content text, tool_calls json, tool_call_id text, name text, is_error bool, in_context bool,
       created_at timestamptz) ON m.step_index = step.step_index
  ORDER BY m.ord
  RETURNING id)"""
_IDS = "array(SELECT id FROM step ORDER BY id) AS pm_step_ids, array(SELECT id FROM msgs ORDER BY id) AS pm_message_ids"
_RESULT = f"\nSELECT {_IDS}"
# With a rider: its CTE, and its returned row's columns beside the steps' (NULLs when it touched no row).
_RIDDEN = f""", rider AS ({{rider}})
SELECT {_IDS}, rider.*
FROM (SELECT 1) AS one LEFT JOIN rider ON true"""
# Without edits: the steps, then their messages (ids are drawn in insertion order: sorted, they are in `ord` order,
# and so are the steps').
PLAIN = "WITH " + _STEPS.format(gate="", where="") + _MESSAGES
# With edits: the blocks first (compare-and-set), the check every insert reads, the versions, then as above. The
# edits of all the steps are one UPDATE per block (a statement cannot update a row twice).
EDITING = f"""WITH upd AS ({PG_BLOCK_UPDATES}),
checked AS (SELECT CAST(CASE WHEN count(*) = %(labels)s THEN '0' ELSE '{STALE}' END AS int) AS ok FROM upd),
{_STEPS.format(gate="checked, ", where=" WHERE checked.ok = 0")},
vers AS ({PG_BLOCK_VERSIONS}){_MESSAGES}"""


@dataclass(frozen=True)
class StepWrite:
    """One step as a commit stores it: its record, its messages and its block edits. A commit stores one or more
    steps of a turn, in order (a step the loop held commits with the next one: `runtime.loop`)."""

    record: StepRecord
    messages: list[Message]
    edits: list[BlockEdit]


@dataclass
class LinkedWrite:
    """A write committed with a turn's incoming message, which rides on it (`StateStore.accept_message`'s `after`),
    or with a commit of steps, riding on it (`StateStore.commit_steps`'s `rider`): a Core statement with RETURNING
    that writes at most one row, and its parameters. `row` is what it returned once stored: a dict of
    its columns, or None when it wrote no row (and then the message was not stored either)."""

    statement: UpdateBase
    params: dict[str, Any]
    row: dict[str, Any] | None = None

    def execute(self, conn: Connection) -> dict[str, Any] | None:
        """Run it inside the caller's transaction (SQLite: Postgres puts it in the statement it goes with); sets and
        returns `row`."""
        found = conn.execute(self.statement, self.params).first()
        self.row = dict(found._mapping) if found is not None else None
        return self.row


def _accept_ctes(after: str = "") -> str:
    """The CTEs that store a turn's incoming message and its idempotency key; `after`: a CTE whose row must exist
    for them to store anything (the write they ride on)."""
    source, only_if = (f"{after}, ", f" FROM {after}") if after else ("", "")
    return f"""msg AS (
  INSERT INTO messages (agent_id, turn_id, step_id, role, content, tool_calls, tool_call_id, name, is_error,
                        in_context, created_at)
  SELECT %(agent_id)s, m.turn_id, %(step_id)s::int, m.role, m.content, m.tool_calls, m.tool_call_id, m.name, m.is_error,
         m.in_context, m.created_at
  FROM {source}json_to_recordset(%(messages)s::json) AS m(ord int, turn_id text, role text, content text,
       tool_calls json, tool_call_id text, name text, is_error bool, in_context bool, created_at timestamptz)
  RETURNING id),
turn_key AS (
  INSERT INTO turn_keys (agent_id, key, turn_id, created_at)
  SELECT %(agent_id)s, %(key)s::text, %(turn_id)s::text, %(created_at)s::timestamptz{only_if}
  WHERE %(key)s::text IS NOT NULL)"""


# A turn's incoming message and its idempotency key (`StateStore.accept_message`), likewise in one statement.
ACCEPT = f"WITH {_accept_ctes()}\nSELECT id FROM msg"
# The same after a linked write of one row: its row, and the message's id (NULLs: nothing was stored).
ACCEPT_AFTER = """WITH first AS ({first}),
{accept}
SELECT first.*, (SELECT id FROM msg) AS pm_message_id FROM (SELECT 1) AS one LEFT JOIN first ON true"""


def accept_parameters(
    agent_id: int, message: Message, key: str | None, cipher: TextCipher | None = None
) -> dict[str, Any]:
    """`ACCEPT`'s parameters: a turn's incoming message (no step yet) and its idempotency key; its text sealed with
    `cipher` (the engine's: this raw statement bypasses the columns' types, `runtime.crypto.columns`)."""
    return {
        "agent_id": agent_id,
        "messages": _messages_json([message], cipher),
        "key": key,
        "turn_id": message.turn_id,
        "created_at": message.created_at,
        "step_id": message.step_id,
    }


async def accept_pg(
    awaited: AwaitedStatements, agent_id: int, message: Message, key: str | None, after: LinkedWrite | None = None
) -> int | None:
    """Store a turn's incoming message and its idempotency key in one statement (its own transaction), after
    `after`'s write when given (then only if it wrote its row; `after.row` gets it); returns the message's id (None:
    nothing was stored). A key used already fails it on the key's primary key (`IntegrityError`)."""
    crash_point("accept.before_commit")  # as in the transaction this replaces: before anything is stored
    parameters = accept_parameters(agent_id, message, key, cipher_of(awaited.engine))
    if after is None:
        message_id: int = (await awaited.one(ACCEPT, parameters))[0]
        return message_id
    sql, values = awaited.prepared(after.statement, after.params)
    statement = ACCEPT_AFTER.format(first=sql, accept=_accept_ctes("first"))
    row = await awaited.one(statement, {**values, **parameters}, shape="mapping")
    linked_id: int | None = row.pop("pm_message_id")
    after.row = row if linked_id is not None else None
    return linked_id


def _text(value: str | None) -> str | None:
    return without_nul(value) if value is not None else None


def _sealed(value: str | None, cipher: TextCipher | None) -> str | None:
    return seal_text(value, cipher) if value is not None else None


def _message_row(m: Message, ord_: int, cipher: TextCipher | None) -> dict[str, Any]:
    calls = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in m.tool_calls] or None
    return {
        "ord": ord_,
        "turn_id": m.turn_id,
        "role": m.role,
        "content": _sealed(m.content, cipher),
        "tool_calls": cipher.seal(json.dumps(calls)) if cipher is not None and calls is not None else calls,
        "tool_call_id": _text(m.tool_call_id),
        "name": _text(m.name),
        "is_error": m.is_error,
        "in_context": m.in_context,
        "created_at": m.created_at.isoformat(),
    }


def _messages_json(messages: list[Message], cipher: TextCipher | None) -> str:
    return json.dumps([_message_row(m, i, cipher) for i, m in enumerate(messages)])


def _blocks_json(
    edits: list[BlockEdit], versions: dict[str, int] | None, cipher: TextCipher | None
) -> tuple[str, dict[str, int]]:
    """Each edited block's last value, edit count and read version; and the versions that writing them leaves."""
    last: dict[str, BlockEdit] = {}
    count: dict[str, int] = {}
    for edit in edits:
        last[edit.label] = edit
        count[edit.label] = count.get(edit.label, 0) + 1
    reads = {label: versions.get(label) if versions is not None else None for label in last}
    rows = [
        {
            "label": label,
            "new_value": _sealed(e.new_value, cipher),
            "at": e.at.isoformat(),
            "n": count[label],
            "read": reads[label],
        }
        for label, e in last.items()
    ]
    return json.dumps(rows), {label: read + count[label] for label in last if (read := reads[label]) is not None}


def steps_statement(
    agent_id: int, steps: Sequence[StepWrite], versions: dict[str, int] | None, cipher: TextCipher | None = None
) -> tuple[str, dict[str, Any], dict[str, int]]:
    """The steps' CTEs (`EDITING` or `PLAIN`, without the final SELECT), their parameters, and the block versions
    that storing them leaves; texts sealed with `cipher` (raw SQL: the columns' types do not apply)."""
    records = [
        {
            "ord": i,
            **w.record.__dict__,
            "model": without_nul(w.record.model),
            "turn_id": without_nul(w.record.turn_id),
            "started_at": w.record.started_at.isoformat(),
        }
        for i, w in enumerate(steps)
    ]
    owned = [(w.record.step_index, m) for w in steps for m in w.messages]
    messages = [{**_message_row(m, i, cipher), "step_index": index} for i, (index, m) in enumerate(owned)]
    params = {"agent_id": agent_id, "steps": json.dumps(records), "messages": json.dumps(messages)}
    edits = [(w.record.step_index, e) for w in steps for e in w.edits]
    if not edits:
        return PLAIN, params, {}
    blocks, written = _blocks_json([e for _, e in edits], versions, cipher)
    params.update(
        blocks=blocks,
        labels=len({e.label for _, e in edits}),
        edits=json.dumps(
            [
                {
                    "ord": i,
                    "step_index": index,
                    "label": e.label,
                    "operation": e.operation,
                    "old_value": _sealed(e.old_value, cipher),
                    "new_value": _sealed(e.new_value, cipher),
                    "created_at": e.at.isoformat(),
                }
                for i, (index, e) in enumerate(edits)
            ]
        ),
    )
    return EDITING, params, written


async def _run_steps(
    awaited: AwaitedStatements, ctes: str, params: dict[str, Any], rider: LinkedWrite | None
) -> tuple[list[int], list[int]]:
    """Run the steps' statement, with the rider's CTE when there is one (its row goes to `rider.row`); returns the
    steps' ids and their messages' ids, in order."""
    if rider is None:
        step_ids, ids = await awaited.one(ctes + _RESULT, params)
        return step_ids, ids
    rider_sql, rider_values = awaited.prepared(rider.statement, rider.params)
    row = await awaited.one(ctes + _RIDDEN.format(rider=rider_sql), {**params, **rider_values}, shape="mapping")
    step_ids, ids = row.pop("pm_step_ids"), row.pop("pm_message_ids")
    rider.row = row if any(value is not None for value in row.values()) else None
    return step_ids, ids


async def store_steps_pg(
    awaited: AwaitedStatements,
    agent_id: int,
    steps: Sequence[StepWrite],
    versions: dict[str, int] | None,
    stale: Callable[[list[str]], Exception],
    rider: LinkedWrite | None = None,
) -> tuple[list[int], list[Message], dict[str, int]]:
    """`StateStore.commit_steps` on Postgres, one statement (its own transaction): (the steps' ids, the stored
    messages, the block versions written); raises `stale(labels)` when a block's version moved (nothing is stored
    then, the rider's write neither). The transaction's crash points all come before the statement: a kill at any
    of them stores nothing, as a kill inside the transaction would."""
    for point in ("commit.step_flushed", "commit.messages_flushed", "commit.before_commit"):
        crash_point(point)
    sql, params, written = steps_statement(agent_id, steps, versions, cipher_of(awaited.engine))
    try:
        step_ids, ids = await _run_steps(awaited, sql, params, rider)
    except DataError as exc:
        if STALE not in str(exc.orig):
            raise
        current = dict(await awaited.rows(BLOCK_VERSIONS, {"agent_id": agent_id}))
        raise stale(stale_labels(current, [e for w in steps for e in w.edits], versions)) from None
    owned = [(m, step_id) for w, step_id in zip(steps, step_ids, strict=True) for m in w.messages]
    return step_ids, [stored_message(m, i, step_id) for (m, step_id), i in zip(owned, ids, strict=True)], written


def write_steps(
    conn: Connection,
    agent_id: int,
    steps: Sequence[StepWrite],
    versions: dict[str, int] | None,
    rider: LinkedWrite | None = None,
) -> tuple[list[int], list[Message], dict[str, int]]:
    """`StateStore.commit_steps` on SQLite, inside the caller's transaction: each step's row, its messages and its
    edits (each checked at the version the steps before it left), then the rider's write. Returns as
    `store_steps_pg` does."""
    step_ids: list[int] = []
    stored: list[Message] = []
    written: dict[str, int] = {}
    for write in steps:
        step_id = conn.execute(INSERT_STEP, [{"agent_id": agent_id, **write.record.__dict__}]).scalar_one()
        crash_point("commit.step_flushed")
        stored += insert_messages(conn, agent_id, write.messages, step_id)
        crash_point("commit.messages_flushed")
        written.update(
            apply_edits(conn, agent_id, step_id, write.edits, {**versions, **written} if versions is not None else None)
        )
        step_ids.append(step_id)
    if rider is not None:
        rider.execute(conn)
    crash_point("commit.before_commit")
    return step_ids, stored, written


BLOCK_VERSIONS = "SELECT label, version FROM blocks WHERE agent_id = %(agent_id)s"


def stale_labels(current: dict[str, int], edits: list[BlockEdit], versions: dict[str, int] | None) -> list[str]:
    """The edited blocks whose version (`current`: label → version now) is no longer the one read (all of them if
    that changed back meanwhile)."""
    labels = sorted({e.label for e in edits})
    stale = [
        label
        for label in labels
        if label not in current
        or (versions is not None and versions.get(label) is not None and current[label] != versions[label])
    ]
    return stale or labels
