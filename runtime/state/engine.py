"""Opening a database: a SQLAlchemy engine for a URL, its schema brought to the head revision.

SQLite under $PAGEMIND_HOME by default, any SQLAlchemy URL (Postgres included) through DATABASE_URL.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Engine

from pagemind.runtime.state.migrate import migrate


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    # WAL + NORMAL: a committed step survives a process crash, and writers don't block readers.
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def make_engine(database_url: str) -> Engine:
    """A SQLAlchemy engine for the URL, its schema migrated to the head revision. SQLite files get their folder."""
    if database_url.startswith("sqlite:///"):
        path = Path(database_url.removeprefix("sqlite:///"))
        path.parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(database_url, connect_args={"check_same_thread": False})
        event.listen(engine, "connect", _sqlite_pragmas)
    else:
        engine = create_engine(database_url, pool_pre_ping=True)
    migrate(engine)
    return engine
