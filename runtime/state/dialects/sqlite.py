"""SQLite: what it does where PostgreSQL differs (`runtime.state.dialects`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import Table
from sqlalchemy.dialects import sqlite
from sqlalchemy.engine import URL, Connection
from sqlalchemy.sql import Select

from pagemind.runtime.state.records import without_nul


class SQLite:
    """The SQLite backend: one file, in-process work, one writer at a time."""

    name = "sqlite"
    awaits_statements = False  # its statements are in-process work with nothing to wait for
    runs_inline = True  # a thread measured slower than running the work inline
    held_reads = False  # it sends no BEGIN for reads; switching isolation levels there and back costs more
    write_begin: str | None = "BEGIN IMMEDIATE"  # take the write lock at once, not at the first write
    autocommit_statements = False
    notices = False  # one daemon per file; other processes learn of a run's end by their poll
    session_locks = False  # an `flock` beside the file instead
    savepoint_per_statement = False  # it undoes just the failed statement (and its driver mishandles savepoints)
    ids_as_json = True
    damaged_hint = "the file is damaged or not a pagemind database: restore it from a backup, or move it away"
    fulltext_insert = "INSERT OR REPLACE INTO recall_fts (rowid, keyed, own) VALUES (:id, :keyed, :own)"
    # An agent's recall index rows; then a merge: a deleted FTS5 row's terms stay in the index's older segments
    # (its deletion is a marker) until they merge.
    fulltext_erase: tuple[str, ...] = (
        "DELETE FROM recall_fts WHERE rowid IN (SELECT id FROM messages WHERE agent_id = :a)",
        "INSERT INTO recall_fts(recall_fts) VALUES ('optimize')",
    )
    keeps_deleted_pages = True  # in free pages and the WAL, until `secure_delete` zeroes them and a checkpoint
    watermark_upsert = (
        "INSERT INTO recall_watermarks (agent_id, message_id) VALUES (:a, :m) ON CONFLICT "
        "(agent_id) DO UPDATE SET message_id = MAX(message_id, :m)"
    )

    def insert(self, table: Table) -> Any:
        """`INSERT … ON CONFLICT` for `table`."""
        return sqlite.insert(table)

    def database_file(self, url: URL) -> Path | None:
        """The database file (None in memory, or for a `file:` URI)."""
        database = url.database
        if not database or database == ":memory:" or database.startswith("file:"):
            return None
        return Path(database)

    def engine_file(self, database_url: str) -> Path | None:
        """The file of a `sqlite:///PATH` URL."""
        return Path(database_url.removeprefix("sqlite:///")) if database_url.startswith("sqlite:///") else None

    def notifying(self, channel: str, payload: Any) -> list[Any]:
        """None: the only listeners are in this process, woken directly."""
        return []

    def notify(self, conn: Connection, channel: str, payload: str) -> None:
        """Nothing: the only listeners are in this process, woken directly."""

    def relax_commit(self, conn: Connection) -> None:
        """Nothing to relax."""

    def lock_migrations(self, conn: Connection, key: int) -> None:
        """Nothing here: a file lock beside the database serialises migrations (`state.migrate`)."""

    def skip_locked(self, query: Select[Any], of: Table) -> Select[Any]:
        """`query` as it is: a write transaction (`BEGIN IMMEDIATE`) already excludes the others."""
        return query

    def fulltext_row(self, message_id: int, agent_id: int, own: str, context: str) -> dict[str, object]:
        """FTS5 columns: own and context together (keyed), and own alone (weighted by `bm25`)."""
        return {"id": message_id, "keyed": f"{own} {context}".strip(), "own": own}

    def fulltext_search(
        self, conn: Connection, agent_id: int, terms: list[str], own_weight: float
    ) -> list[tuple[int, float]]:
        """FTS5's `bm25` (negated: higher better), own terms weighted by `own_weight`."""
        query = without_nul(" OR ".join(f'"{t}"' for t in terms))
        # CROSS JOIN fixes the order: the full-text match first, then each match's message by primary key. Left to
        # itself the planner walks the agent's messages and asks FTS5 about each rowid, which runs the whole MATCH
        # again per message: ~3 s instead of ~10 ms at 10,000 messages. The driver's own cursor: thousands of
        # (id, score) pairs need none of SQLAlchemy's per-row work (≈ 2 ms of 7).
        driver: Any = conn.connection.driver_connection  # the open connection's sqlite3 connection
        rows = driver.execute(
            f"SELECT recall_fts.rowid, -bm25(recall_fts, 1.0, {float(own_weight)}) FROM recall_fts "
            "CROSS JOIN messages ON messages.id = recall_fts.rowid "
            "WHERE recall_fts MATCH :q AND messages.agent_id = :a",
            {"q": query, "a": agent_id},
        ).fetchall()
        return [(int(i), float(s)) for i, s in rows]


SQLITE = SQLite()
