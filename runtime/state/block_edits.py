"""Core memory block edits as SQL writes: each a compare-and-set on the block's version.

A step's edits (on SQLite, inside its transaction; on Postgres they are part of the step's one statement,
`state.conversation.step_commit`) and an operator's edits through the daemon's API (`StateStore.commit_edits`) are
written here: one UPDATE … WHERE version = <the version read> per edit, so the check holds even against a writer
that bypassed the turn lock, and every edit recorded in `block_versions`. This is the one module that writes
`block_versions`: a step's edits, an operator's, a reset's (`reset_version`), and an imported agent's history
(`insert_history`, `runtime.porting`).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy import insert, select, update
from sqlalchemy.engine import Connection

from pagemind.blocks import BlockEdit
from pagemind.runtime.state.rows import blocks_table
from pagemind.runtime.state.tables.agents import BlockVersionRow
from pagemind.runtime.state.tables.schema import table_of

# The same writes on Postgres, as parts of a step's one statement (`state.conversation.step_commit.EDITING`): every
# step's edits as one UPDATE per block (a statement cannot update a row twice), and their history rows, each with
# its step's id.
PG_BLOCK_UPDATES = """
  UPDATE blocks AS b SET value = e.new_value, updated_at = e.at, version = b.version + e.n
  FROM json_to_recordset(%(blocks)s::json) AS e(label text, new_value text, at timestamptz, n int, read int)
  WHERE b.agent_id = %(agent_id)s AND b.label = e.label AND (e.read IS NULL OR b.version = e.read)
  RETURNING b.label"""
PG_BLOCK_VERSIONS = """
  INSERT INTO block_versions (agent_id, label, step_id, operation, old_value, new_value, created_at)
  SELECT %(agent_id)s, v.label, step.id, v.operation, v.old_value, v.new_value, v.created_at
  FROM step JOIN json_to_recordset(%(edits)s::json) AS v(ord int, step_index int, label text, operation text,
       old_value text, new_value text, created_at timestamptz) ON v.step_index = step.step_index
  ORDER BY v.ord"""


VERSIONS = table_of(BlockVersionRow)


def insert_history(conn: Connection, rows: list[dict[str, Any]]) -> None:
    """Insert block history rows as they are (an imported agent's, `runtime.porting.load`: each with its agent's id
    and step ids already this database's); not committed."""
    if rows:
        conn.execute(insert(VERSIONS), rows)


def reset_version(agent_id: int, label: str, old_value: str, new_value: str, at: datetime) -> BlockVersionRow:
    """The history row of a block set back to its seed (`ensure_agent` with `reset_memory`), no step's."""
    return BlockVersionRow(
        agent_id=agent_id, label=label, operation="reset", old_value=old_value, new_value=new_value, created_at=at
    )


class StaleBlocks(RuntimeError):
    """A block write was computed from a version another writer has replaced since (nothing was stored)."""

    def __init__(self, labels: list[str]):
        super().__init__(
            f"core memory block(s) {', '.join(labels)} changed since this agent read them (another "
            "process edited them during this turn); nothing from this step was stored"
        )
        self.labels = labels


def apply_edits(
    conn: Connection, agent_id: int, step_id: int | None, edits: list[BlockEdit], versions: dict[str, int] | None
) -> dict[str, int]:
    """Write each edit as a compare-and-set on the block's version (one UPDATE … WHERE version = read), so the
    check holds even against a writer that bypassed the turn lock. Returns the versions written; raises
    `StaleBlocks` (the caller's transaction rolls back) when a version moved."""
    if not edits:
        return {}
    written: dict[str, int] = {}
    stale: list[str] = []
    conn.execute(
        insert(VERSIONS),
        [
            {
                "agent_id": agent_id,
                "label": e.label,
                "step_id": step_id,
                "operation": e.operation,
                "old_value": e.old_value,
                "new_value": e.new_value,
                "created_at": e.at,
            }
            for e in edits
        ],
    )
    for edit in edits:
        where = [blocks_table.c.agent_id == agent_id, blocks_table.c.label == edit.label]
        read = written.get(edit.label, versions.get(edit.label) if versions is not None else None)
        if read is not None:
            where.append(blocks_table.c.version == read)
        result = conn.execute(
            update(blocks_table)
            .where(*where)
            .values(value=edit.new_value, updated_at=edit.at, version=blocks_table.c.version + 1)
        )
        if result.rowcount != 1:
            stale.append(edit.label)
        elif read is not None:
            written[edit.label] = read + 1
    if stale:
        raise StaleBlocks(sorted(set(stale)))
    return written


def scrub_versions(conn: Connection, agent_id: int, scrub: Callable[[str], str]) -> int:
    """Rewrite the agent's block history with `scrub` applied to every old and new value (a forget: what the user
    asked to forget leaves every version, not only the current value); how many rows changed."""
    versions = table_of(BlockVersionRow)
    query = select(versions.c.id, versions.c.old_value, versions.c.new_value).where(versions.c.agent_id == agent_id)
    changed = 0
    for row_id, old, new in conn.execute(query).all():
        old_scrubbed, new_scrubbed = scrub(old), scrub(new)
        if (old_scrubbed, new_scrubbed) != (old, new):
            values = {"old_value": old_scrubbed, "new_value": new_scrubbed}
            conn.execute(update(versions).where(versions.c.id == row_id).values(**values))
            changed += 1
    return changed
