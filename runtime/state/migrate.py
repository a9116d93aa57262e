"""Bring a database to the head revision of the schema, safely from any number of processes at once.

`migrate(engine)` runs when a store opens. A database already at the head revision costs two small queries and
never loads Alembic. Otherwise the migrations in `migrations/versions/` run under a lock that every other starting
process waits on:

- Postgres: `pg_advisory_xact_lock` taken on the migration connection, inside the one transaction that runs every
  pending migration (Postgres DDL is transactional: all of them or none) and released when it commits;
- SQLite: an `fcntl` lock on `<database file>.lock` beside the database, and a connection that really begins a
  transaction before DDL (the sqlite3 module would otherwise commit each statement), so a crash leaves the previous
  revision behind, never half of the next.

The process that gets the lock second finds the database at head and does nothing. A database made before
migrations existed (pagemind 0.1.0: tables, no `alembic_version`) is adopted by revision 0001, which creates only
what is missing, and then upgraded like any other.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import structlog
from sqlalchemy import create_engine, event, inspect, text
from sqlalchemy.engine import Connection, Engine

from pagemind.runtime.state.dialects import dialect

log = structlog.get_logger("pagemind.migrate")

FULLTEXT_PREFIX = "recall_fts"  # the recall index's raw-DDL tables (see state.tables.memory)

MIGRATIONS = Path(__file__).parent / "migrations"
VERSION_TABLE = "alembic_version"
_LOCK_KEY = 0x7061_6765_6D69_6E64 >> 1  # "pagemind", as a positive bigint: the advisory lock's key


class SchemaTooNew(RuntimeError):
    """The database was migrated by a newer pagemind than this one."""


@functools.cache
def head_revision() -> str:
    """The newest revision: revision ids are sequential 4-digit numbers that prefix their file names (the
    `revision` command in `migrations/__main__.py` numbers them so), which spares loading Alembic to know it."""
    return max(p.name[:4] for p in (MIGRATIONS / "versions").glob("[0-9][0-9][0-9][0-9]_*.py"))


def alembic_config(connection: Connection | None = None) -> Any:
    """Alembic's configuration, built in code (no alembic.ini), with `connection` for env.py to migrate."""
    from alembic.config import Config

    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS))
    config.set_main_option("file_template", "%%(rev)s_%%(slug)s")
    config.attributes["connection"] = connection
    return config


def include_name(name: str | None, type_: str, _parent: Any) -> bool:
    """For autogenerate: leave the raw-DDL full-text index (and SQLite's FTS5 shadow tables) out of the comparison."""
    return not (type_ == "table" and name is not None and name.startswith(FULLTEXT_PREFIX))


def render_item(type_: str, obj: Any, _autogen_context: Any) -> str | Literal[False]:
    """For autogenerate: write sqlmodel's column types as plain SQLAlchemy ones (migrations never import sqlmodel)."""
    if type_ == "type":
        kind = type(obj).__name__
        if kind == "AutoString":
            return "sa.String()"
        if kind == "UTCDateTime":
            return "sa.DateTime(timezone=True)"
    return False


def current_revision(connection: Connection) -> str | None:
    """The database's schema revision, or None when it has none (fresh, or made before migrations)."""
    if not inspect(connection).has_table(VERSION_TABLE):
        return None
    return connection.execute(text(f"SELECT version_num FROM {VERSION_TABLE}")).scalar()


def migrate(engine: Engine) -> None:
    """Upgrade the engine's database to the head revision (a no-op when it is there)."""
    with engine.connect() as conn:
        if current_revision(conn) == head_revision():
            return
    backend = dialect(engine)
    path = backend.database_file(engine.url)
    if path is None:  # a server (its own lock, in the transaction) or a database in memory (one process)
        with engine.begin() as conn:
            backend.lock_migrations(conn, _LOCK_KEY)
            _upgrade(conn)
        return
    with _file_lock(path.with_name(path.name + ".lock")):
        migrator = _sqlite_migration_engine(engine)
        try:
            with migrator.begin() as conn:
                _upgrade(conn)
        finally:
            migrator.dispose()


def _upgrade(conn: Connection) -> None:
    """Run the pending migrations on `conn` (the caller holds the lock and the transaction)."""
    from alembic import command

    before = current_revision(conn)
    if before == head_revision():
        return  # another process migrated while this one waited for the lock
    if before is not None and before > head_revision():
        raise SchemaTooNew(
            f"the database is at schema revision {before}, newer than this pagemind knows "
            f"({head_revision()}): upgrade pagemind to open it"
        )
    if before is None and inspect(conn).has_table("agents"):
        log.info("schema_adopt", detail="a database made before migrations: revision 0001 adopts it")
    command.upgrade(alembic_config(conn), "head")
    log.info("schema_migrated", from_revision=before, to_revision=current_revision(conn))


@contextlib.contextmanager
def _file_lock(path: Path) -> Iterator[None]:
    """An exclusive `fcntl` lock on `path`, held for the block (released by the OS if the process dies)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _sqlite_migration_engine(engine: Engine) -> Engine:
    """A private engine on the same file whose transactions really begin before DDL (see the module docstring)."""
    migrator = create_engine(engine.url)

    @event.listens_for(migrator, "connect")
    def _autocommit_driver(dbapi_connection: Any, _record: Any) -> None:
        dbapi_connection.isolation_level = None  # the driver stops issuing (and skipping) its own BEGINs
        dbapi_connection.execute("PRAGMA journal_mode=WAL")

    @event.listens_for(migrator, "begin")
    def _begin(conn: Connection) -> None:
        conn.exec_driver_sql("BEGIN IMMEDIATE")  # take the write lock now: readers go on, writers wait for us

    return migrator
