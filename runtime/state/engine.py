"""Opening a database: a SQLAlchemy engine for a URL, its schema brought to the head revision.

SQLite under $PAGEMIND_HOME by default, any SQLAlchemy URL (Postgres included) through DATABASE_URL.

Every statement's string parameters go through `state.records.without_nul` (NUL becomes U+FFFD) on every
database, so text with a NUL is stored, and looked up, the same way on SQLite and Postgres (which refuses NUL).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine

from pagemind.runtime import logs as _logs  # noqa: F401  (imported for its effect: logs go to stderr)

from pagemind.runtime.state.migrate import migrate
from pagemind.runtime.state.records import without_nul


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    # WAL + NORMAL: a committed step survives a process crash, and writers don't block readers.
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        return without_nul(value)
    if isinstance(value, dict):
        return {k: _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_clean(v) for v in value)
    return value


def _without_nul(_conn: Any, _cursor: Any, statement: str, parameters: Any, _context: Any,
                 _executemany: bool) -> tuple[str, Any]:
    # Here rather than per column: raw SQL (the recall index) and WHERE parameters get the same rule as the ORM.
    return statement, _clean(parameters)


def make_engine(database_url: str) -> Engine:
    """A SQLAlchemy engine for the URL, its schema migrated to the head revision. SQLite files get their folder."""
    if database_url.startswith("sqlite:///"):
        path = Path(database_url.removeprefix("sqlite:///"))
        path.parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(database_url, connect_args={"check_same_thread": False})
        event.listen(engine, "connect", _sqlite_pragmas)
    else:
        engine = create_engine(database_url, pool_pre_ping=True)
    event.listen(engine, "before_cursor_execute", _without_nul, retval=True)
    migrate(engine)
    return engine
