"""Where PostgreSQL and SQLite differ: one module per backend (`postgres`, `sqlite`), each a `Dialect` with the same
attributes and functions. Every other module asks `dialect(engine)` (or `dialect_for_url`) what its backend does,
and never tests a backend's name itself (tests/project/test_dialects.py checks it).

What a backend has or lacks is an attribute here (`awaits_statements`, `notices`, `session_locks`, ...); SQL that
differs is a function or a statement of each backend (`insert`, `notify`, the recall index's statements, ...).
Features only Postgres has are modules of their own, used where the dialect says the backend has them: awaited
statements (`state.async_pg`), advisory turn locks (`state.locks`), LISTEN (`scheduler.queue.wakeup`), the event
relay (`scheduler.streams.relay`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

from sqlalchemy import Table, make_url
from sqlalchemy.engine import URL, Connection, Engine
from sqlalchemy.sql import Select

from pagemind.runtime.state.dialects.postgres import POSTGRES
from pagemind.runtime.state.dialects.sqlite import SQLITE


class Dialect(Protocol):
    """What one backend does (see the module docstring); `postgres.POSTGRES` and `sqlite.SQLITE` are the two."""

    name: str
    awaits_statements: bool  # a turn's statements are awaited on async connections (`state.async_pg`)
    runs_inline: bool  # a store call is in-process work, run inline rather than in a thread (`state.off_loop`)
    held_reads: bool  # the store's reads go on the thread's held autocommit connection (`state.held`)
    write_begin: str | None  # the statement that opens a write transaction, if the driver's BEGIN is not enough
    autocommit_statements: bool  # a one-statement write runs on the autocommit connection (its own transaction)
    notices: bool  # LISTEN/NOTIFY between processes: wake-ups, the event relay, `serve --workers`
    session_locks: bool  # advisory locks held by a database session (turn locks, the migration lock)
    savepoint_per_statement: bool  # a failed statement aborts the transaction unless it ran in a savepoint
    ids_as_json: bool  # a long list of ids goes as one JSON parameter (SQLite's bound-variable limit and planner)
    damaged_hint: str  # what to do when the database cannot be opened
    fulltext_insert: str  # the recall index's insert (`memory.recall.fulltext`), rows from `fulltext_row`
    watermark_upsert: str  # the recall index's watermark, moved forward only
    fulltext_erase: tuple[str, ...]  # the statements that delete an agent's recall index rows (`runtime.erasure`)
    keeps_deleted_pages: bool  # deleted rows stay in the file until zeroed and checkpointed (`runtime.erasure`)

    def insert(self, table: Table) -> Any:
        """The backend's INSERT for `table`, with its `on_conflict_do_nothing` / `on_conflict_do_update`."""

    def database_file(self, url: URL) -> Path | None:
        """The database's file, when it is one (a lock file goes beside it); None for a server or in memory."""

    def engine_file(self, database_url: str) -> Path | None:
        """The file `state.engine.make_engine` checks and creates before it opens the URL, if any."""

    def notifying(self, channel: str, payload: Any) -> list[Any]:
        """Extra RETURNING columns that NOTIFY `channel` with `payload` when the statement commits (or none)."""

    def notify(self, conn: Connection, channel: str, payload: str) -> None:
        """NOTIFY `channel` when the transaction on `conn` commits (or nothing: no one else listens)."""

    def relax_commit(self, conn: Connection) -> None:
        """Commit this transaction without waiting for the log's flush, where the backend can."""

    def lock_migrations(self, conn: Connection, key: int) -> None:
        """Serialise processes migrating one database, inside `conn`'s transaction (a file lock does it otherwise)."""

    def skip_locked(self, query: Select[Any], of: Table) -> Select[Any]:
        """`query` locking the rows of `of` it reads, skipping those another transaction holds, where it can."""

    def fulltext_row(self, message_id: int, agent_id: int, own: str, context: str) -> dict[str, object]:
        """A message's row for `fulltext_insert`: its own terms and its context's."""

    def fulltext_search(
        self, conn: Connection, agent_id: int, terms: list[str], own_weight: float
    ) -> list[tuple[int, float]]:
        """(message id, score) of the agent's messages matching any of `terms`, higher better."""


def dialect(bind: Engine | Connection) -> Dialect:
    """The backend of an engine or a connection."""
    return _by_name(bind.dialect.name)


def dialect_for_url(database_url: str) -> Dialect:
    """The backend a database URL names (ArgumentError for a URL that is none)."""
    return _by_name(make_url(database_url).get_backend_name())


def _by_name(name: str) -> Dialect:
    return POSTGRES if name == POSTGRES.name else SQLITE
