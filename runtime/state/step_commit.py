"""A step's commit on Postgres as one statement: its record, its messages and its block edits in one round trip.

`StateStore.commit_step` on SQLite runs a transaction of three to five statements (the step, its messages, the
block versions, an UPDATE per edited block). On Postgres each of those is a round trip and a statement for
SQLAlchemy to execute, with a BEGIN riding on the first and a COMMIT after the last: a daemon spent ~20 % of its CPU
per step there. Here the whole step is one statement with data-modifying CTEs, run on an autocommit connection
(the statement is its own transaction), awaited (`state.async_pg`): all of it is stored, or none.

The block edits keep their compare-and-set: each edited block is updated only at the version its value was
computed from, and when fewer blocks were updated than were edited, a CTE whose value the step's insert filters on
fails the statement (a cast of 'stale blocks' to an integer), so nothing is stored; `StaleBlocks` is raised as
before. (Filtered on, not merely selected from: a CTE's column that nothing reads is never computed.)
Several edits of one block in a step are one UPDATE here (its last value, its version moved by the number of
edits), which is what the edits applied one by one leave.

A `LinkedWrite` is another write that commits with the step, in the same statement (a data-modifying CTE): the
daemon marks its inbox item done with the turn's last step, so a turn costs one round trip less and its end and
its item's end are one commit. Likewise a turn's incoming message can ride on a write (`accept_after_pg`): the
daemon's submission for an agent whose worker waits for it stores the item and the turn's user message at once.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Callable

from sqlalchemy.engine import Connection
from sqlalchemy.exc import DataError
from sqlalchemy.sql import ClauseElement

from pagemind.blocks import BlockEdit
from pagemind.runtime.crashpoints import crash_point
from pagemind.runtime.messages import Message
from pagemind.runtime.state.async_pg import AwaitedStatements
from pagemind.runtime.state.records import StepRecord, without_nul
from pagemind.runtime.state.rows import stored_message

STALE = "stale blocks"  # the text whose cast to an integer fails the statement when a block's version moved

_STEP_COLUMNS = ("agent_id, turn_id, step_index, model, prompt_tokens, completion_tokens, stop_reason, started_at, "
                 "model_ms, total_ms")
_STEP_VALUES = ("%(agent_id)s, %(turn_id)s, %(step_index)s, %(model)s, %(prompt_tokens)s, %(completion_tokens)s, "
                "%(stop_reason)s, %(started_at)s, %(model_ms)s, %(total_ms)s")
_MESSAGES = """, msgs AS (
  INSERT INTO messages (agent_id, turn_id, step_id, role, content, tool_calls, tool_call_id, name, is_error,
                        in_context, created_at)
  SELECT %(agent_id)s, m.turn_id, step.id, m.role, m.content, m.tool_calls, m.tool_call_id, m.name, m.is_error,
         m.in_context, m.created_at
  FROM step, json_to_recordset(%(messages)s::json) AS m(ord int, turn_id text, role text, content text,
       tool_calls json, tool_call_id text, name text, is_error bool, in_context bool, created_at timestamptz)
  ORDER BY m.ord
  RETURNING id)"""
_RESULT = "\nSELECT (SELECT id FROM step), array(SELECT id FROM msgs ORDER BY id)"
# With a rider: its CTE, and its returned row's columns beside the step's (NULLs when it touched no row).
_RIDDEN = """, rider AS ({rider})
SELECT (SELECT id FROM step) AS pm_step_id, array(SELECT id FROM msgs ORDER BY id) AS pm_message_ids, rider.*
FROM (SELECT 1) AS one LEFT JOIN rider ON true"""
# Without edits: the step, then its messages (ids are drawn in insertion order: sorted, they are in `ord` order).
PLAIN = f"WITH step AS (INSERT INTO steps ({_STEP_COLUMNS}) VALUES ({_STEP_VALUES}) RETURNING id){_MESSAGES}"
# With edits: the blocks first (compare-and-set), the check every insert reads, the versions, then as above.
EDITING = f"""WITH upd AS (
  UPDATE blocks AS b SET value = e.new_value, updated_at = e.at, version = b.version + e.n
  FROM json_to_recordset(%(blocks)s::json) AS e(label text, new_value text, at timestamptz, n int, read int)
  WHERE b.agent_id = %(agent_id)s AND b.label = e.label AND (e.read IS NULL OR b.version = e.read)
  RETURNING b.label),
checked AS (SELECT CAST(CASE WHEN count(*) = %(labels)s THEN '0' ELSE '{STALE}' END AS int) AS ok FROM upd),
step AS (INSERT INTO steps ({_STEP_COLUMNS}) SELECT {_STEP_VALUES} FROM checked WHERE checked.ok = 0 RETURNING id),
vers AS (
  INSERT INTO block_versions (agent_id, label, step_id, operation, old_value, new_value, created_at)
  SELECT %(agent_id)s, v.label, step.id, v.operation, v.old_value, v.new_value, v.created_at
  FROM step, json_to_recordset(%(edits)s::json) AS v(ord int, label text, operation text, old_value text,
       new_value text, created_at timestamptz)
  ORDER BY v.ord){_MESSAGES}"""




@dataclass
class LinkedWrite:
    """A write committed in one transaction with a step (riding on it: see the module docstring), or with a turn's
    incoming message (which rides on it: `accept_after_pg`): a Core statement with RETURNING that writes at most one
    row, and its parameters. `row` is what it returned once stored: a dict of its columns, or None when it wrote
    no row."""

    statement: ClauseElement
    params: dict[str, Any]
    row: dict[str, Any] | None = None

    def execute(self, conn: Connection) -> dict[str, Any] | None:
        """Run it inside the caller's transaction (SQLite: Postgres puts it in the statement it rides with); sets
        and returns `row`."""
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
# The same after another write of one row (`StateStore.accept_after`): its row, and the message's id (NULLs: none).
ACCEPT_AFTER = """WITH first AS ({first}),
{accept}
SELECT first.*, (SELECT id FROM msg) AS pm_message_id FROM (SELECT 1) AS one LEFT JOIN first ON true"""


def accept_parameters(agent_id: int, message: Message, key: str | None) -> dict[str, Any]:
    """`ACCEPT`'s parameters: a turn's incoming message (no step yet) and its idempotency key."""
    return {"agent_id": agent_id, "messages": _messages_json([message]), "key": key, "turn_id": message.turn_id,
            "created_at": message.created_at, "step_id": message.step_id}


async def accept_pg(awaited: AwaitedStatements, agent_id: int, message: Message, key: str | None) -> int:
    """Store a turn's incoming message and its idempotency key in one statement (its own transaction); returns the
    message's id. A key used already fails it on the key's primary key (`IntegrityError`)."""
    crash_point("accept.before_commit")  # as in the transaction this replaces: before anything is stored
    (message_id,) = await awaited.first(ACCEPT, accept_parameters(agent_id, message, key))
    return message_id


async def accept_after_pg(awaited: AwaitedStatements, first: LinkedWrite, agent_id: int, message: Message,
                          key: str | None) -> int | None:
    """`first`'s write and then, if it wrote its row, a turn's incoming message and its key, in one statement (its
    own transaction); `first.row` gets its row. Returns the message's id (None: nothing was stored)."""
    crash_point("accept.before_commit")
    sql, values = awaited.prepared(first.statement, first.params)
    row = await awaited.first(ACCEPT_AFTER.format(first=sql, accept=_accept_ctes("first")),
                              {**values, **accept_parameters(agent_id, message, key)}, shape="mapping")
    message_id = row.pop("pm_message_id")
    first.row = row if message_id is not None else None
    return message_id


def _text(value: str | None) -> str | None:
    return without_nul(value) if value is not None else None


def _messages_json(messages: list[Message]) -> str:
    return json.dumps([
        {"ord": i, "turn_id": m.turn_id, "role": m.role, "content": _text(m.content),
         "tool_calls": [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in m.tool_calls] or None,
         "tool_call_id": _text(m.tool_call_id), "name": _text(m.name), "is_error": m.is_error,
         "in_context": m.in_context, "created_at": m.created_at.isoformat()} for i, m in enumerate(messages)])


def _blocks_json(edits: list[BlockEdit], versions: dict[str, int] | None) -> tuple[str, dict[str, int]]:
    """Each edited block's last value, edit count and read version; and the versions that writing them leaves."""
    last: dict[str, BlockEdit] = {}
    count: dict[str, int] = {}
    for edit in edits:
        last[edit.label] = edit
        count[edit.label] = count.get(edit.label, 0) + 1
    reads = {label: versions.get(label) if versions is not None else None for label in last}
    rows = [{"label": label, "new_value": without_nul(e.new_value), "at": e.at.isoformat(), "n": count[label],
             "read": reads[label]} for label, e in last.items()]
    return json.dumps(rows), {label: reads[label] + count[label] for label in last if reads[label] is not None}


def step_statement(agent_id: int, step: StepRecord, messages: list[Message], edits: list[BlockEdit],
                   versions: dict[str, int] | None) -> tuple[str, dict[str, Any], dict[str, int]]:
    """The step's CTEs (`EDITING` or `PLAIN`, without the final SELECT), its parameters, and the block versions that
    storing it leaves."""
    params = {"agent_id": agent_id, **step.__dict__, "messages": _messages_json(messages)}
    if not edits:
        return PLAIN, params, {}
    blocks, written = _blocks_json(edits, versions)
    params.update(blocks=blocks, labels=len({e.label for e in edits}), edits=json.dumps([
        {"ord": i, "label": e.label, "operation": e.operation, "old_value": without_nul(e.old_value),
         "new_value": without_nul(e.new_value), "created_at": e.at.isoformat()} for i, e in enumerate(edits)]))
    return EDITING, params, written


async def _run_step(awaited: AwaitedStatements, ctes: str, params: dict[str, Any],
                    rider: LinkedWrite | None) -> tuple[int, list[int]]:
    """Run the step's statement, with the rider's CTE when there is one (its row goes to `rider.row`); returns the
    step id and its messages' ids."""
    if rider is None:
        step_id, ids = await awaited.first(ctes + _RESULT, params)
        return step_id, ids
    rider_sql, rider_values = awaited.prepared(rider.statement, rider.params)
    row = await awaited.first(ctes + _RIDDEN.format(rider=rider_sql), {**params, **rider_values}, shape="mapping")
    step_id, ids = row.pop("pm_step_id"), row.pop("pm_message_ids")
    rider.row = row if any(value is not None for value in row.values()) else None
    return step_id, ids


async def store_step_pg(awaited: AwaitedStatements, agent_id: int, step: StepRecord, messages: list[Message],
                        edits: list[BlockEdit], versions: dict[str, int] | None,
                        stale: Callable[[list[str]], Exception],
                        rider: LinkedWrite | None = None) -> tuple[int, list[Message], dict[str, int]]:
    """`StateStore.commit_step` on Postgres, one statement (its own transaction): (the step id, the stored messages,
    the block versions written); raises `stale(labels)` when a block's version moved (nothing is stored then, the
    rider's write neither). The transaction's crash points all come before the statement: a kill at any of them
    stores nothing, as a kill inside the transaction would."""
    for point in ("commit.step_flushed", "commit.messages_flushed", "commit.before_commit"):
        crash_point(point)
    sql, params, written = step_statement(agent_id, step, messages, edits, versions)
    try:
        step_id, ids = await _run_step(awaited, sql, params, rider)
    except DataError as exc:
        if STALE not in str(exc.orig):
            raise
        current = dict(await awaited.rows(BLOCK_VERSIONS, {"agent_id": agent_id}))
        raise stale(stale_labels(current, edits, versions)) from None
    return step_id, [stored_message(m, i, step_id) for m, i in zip(messages, ids)], written


BLOCK_VERSIONS = "SELECT label, version FROM blocks WHERE agent_id = %(agent_id)s"


def stale_labels(current: dict[str, int], edits: list[BlockEdit], versions: dict[str, int] | None) -> list[str]:
    """The edited blocks whose version (`current`: label → version now) is no longer the one read (all of them if
    that changed back meanwhile)."""
    labels = sorted({e.label for e in edits})
    stale = [label for label in labels if label not in current
             or (versions is not None and versions.get(label) is not None and current[label] != versions[label])]
    return stale or labels
