"""Opening a database: a SQLAlchemy engine for a URL, its schema brought to the head revision.

SQLite under $PAGEMIND_HOME by default, any SQLAlchemy URL (Postgres included) through DATABASE_URL.

Every statement's string parameters go through `state.records.without_nul` (NUL becomes U+FFFD) on every
database, so text with a NUL is stored, and looked up, the same way on SQLite and Postgres (which refuses NUL).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from sqlalchemy import create_engine, event, make_url
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Engine

from pagemind.runtime.crypto.columns import bind_cipher
from pagemind.runtime.crypto.keys import Encryption, EncryptionKeyError
from pagemind.runtime.process import logs as _logs  # noqa: F401  (imported for its effect: logs go to stderr)
from pagemind.runtime.state.dialects import dialect_for_url
from pagemind.runtime.state.encryption.record import open_cipher
from pagemind.runtime.state.migrate import migrate
from pagemind.runtime.state.records import without_nul


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    # WAL + NORMAL: a committed step survives a process crash, and writers don't block readers.
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.close()


def clean_parameters(value: Any) -> Any:
    """Statement parameters with every string's NUL replaced (`state.records.without_nul`), however nested."""
    if isinstance(value, str):
        return without_nul(value)
    if isinstance(value, dict):
        return {k: clean_parameters(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(clean_parameters(v) for v in value)
    return value


def _without_nul(
    _conn: Any, _cursor: Any, statement: str, parameters: Any, _context: Any, _executemany: bool
) -> tuple[str, Any]:
    # Here rather than per column: raw SQL (the recall index) and WHERE parameters get the same rule as the ORM.
    return statement, clean_parameters(parameters)


# A pooled server connection idle this long is pinged before it is handed out (see `_ping_if_idle`).
IDLE_PING_S = 1.0


def _ping_if_idle(engine: Engine) -> None:
    """Ping a pooled connection at checkout only when it has been idle for `IDLE_PING_S`, instead of at every
    checkout (`pool_pre_ping`): a busy daemon checks a connection out several times a step, and each ping is a
    round trip that blocks its event loop. What the ping is for, a connection the server dropped while it sat in
    the pool (a restart, an idle timeout), happens to idle connections; a drop within the last second shows as an
    error of the statement, as it would mid-transaction with a ping too, and the pool is invalidated then. A
    failed ping raises `DisconnectionError`, on which the pool retries with a new connection (SQLAlchemy's
    recipe for pessimistic disconnect handling)."""

    def checked_in(_dbapi_connection: Any, record: Any) -> None:
        record.info["pagemind_idle_since"] = time.monotonic()

    def checkout(dbapi_connection: Any, record: Any, _proxy: Any) -> None:
        since = record.info.get("pagemind_idle_since")
        if since is not None and time.monotonic() - since < IDLE_PING_S:
            return
        try:
            engine.dialect.do_ping(dbapi_connection)
        except Exception as exc:
            raise sa_exc.DisconnectionError(f"ping failed: {_first_line(exc)}") from exc

    event.listen(engine, "connect", checked_in)  # a connection just made needs no ping
    event.listen(engine, "checkin", checked_in)
    event.listen(engine, "checkout", checkout)


SUPPORTED_DIALECTS = ("sqlite", "postgresql")


class DatabaseOpenError(RuntimeError):
    """The database cannot be opened (a bad URL, a server that does not answer, a damaged file); the message says
    which database and what to do."""


def _shown(database_url: str) -> str:
    """The URL without its password, for messages."""
    try:
        return make_url(database_url).render_as_string(hide_password=True)
    except (sa_exc.ArgumentError, ValueError):
        return database_url if len(database_url) <= 200 else database_url[:200] + "…"


def _first_line(error: BaseException) -> str:
    cause = getattr(error, "orig", None) or error
    return (str(cause).strip().splitlines() or [type(cause).__name__])[0]


def _check_sqlite_file(path: Path) -> None:
    """Refuse a zero-byte database file, and create a new one with its header written, under the lock migrations
    take (`<file>.lock`). SQLite takes an empty file for a new database: a zero-byte pagemind.db (a failed copy, a
    full disk) would silently become a fresh, empty agent store with every memory gone. Creating the file here, in
    WAL mode (which writes its header at once), under that lock means a process starting beside another never sees
    the other's file while it is still empty."""
    import fcntl
    import sqlite3

    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "a+") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            if path.exists():
                if path.is_file() and path.stat().st_size == 0:
                    raise DatabaseOpenError(
                        f"database file {path} is empty (0 bytes), not a pagemind database: "
                        "restore it from a backup, or delete it to start with no agents"
                    )
                return
            try:
                connection = sqlite3.connect(path)
                try:
                    connection.execute("PRAGMA journal_mode=WAL")
                finally:
                    connection.close()
            except sqlite3.Error as exc:
                raise DatabaseOpenError(f"cannot create the database file {path}: {exc}") from None
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def make_engine(database_url: str, encryption: Encryption | None = None) -> Engine:
    """A SQLAlchemy engine for the URL, its schema migrated to the head revision. SQLite files get their folder.
    With `encryption` (the settings' key, or none), the key is checked against the database's key-check record and
    the engine seals and opens its encrypted columns with it (`runtime.crypto`); without, nothing is checked and
    nothing is sealed (a sealed value read raises). Raises DatabaseOpenError (one line: which database, what went
    wrong) when it cannot be opened, a wrong or missing key included."""
    dialect = database_url.partition("://")[0].partition("+")[0] if "://" in database_url else ""
    if dialect not in SUPPORTED_DIALECTS:  # another dialect's driver is not installed, nor its SQL written for
        raise DatabaseOpenError(
            f"DATABASE_URL {_shown(database_url)!r} is not a database URL pagemind can use "
            f"({f'{dialect} is not supported' if dialect else 'no scheme'}); e.g. postgresql://user@host:5432/db or "
            "sqlite:///path/to/pagemind.db"
        )
    try:
        backend = dialect_for_url(database_url)
        path = backend.engine_file(database_url)
        if path is not None:
            _check_sqlite_file(path)
            engine = create_engine(database_url, connect_args={"check_same_thread": False})
            event.listen(engine, "connect", _sqlite_pragmas)
        else:
            engine = create_engine(database_url)
            _ping_if_idle(engine)
    except (sa_exc.ArgumentError, sa_exc.NoSuchModuleError, ValueError, ImportError) as exc:
        raise DatabaseOpenError(
            f"DATABASE_URL {_shown(database_url)!r} is not a database URL pagemind can use "
            f"({_first_line(exc)}); e.g. postgresql://user@host:5432/db or "
            "sqlite:///path/to/pagemind.db"
        ) from None
    except OSError as exc:
        raise DatabaseOpenError(f"cannot create the database folder for {_shown(database_url)}: {exc}") from None
    event.listen(engine, "before_cursor_execute", _without_nul, retval=True)
    try:
        migrate(engine)
    except sa_exc.DatabaseError as exc:
        engine.dispose()
        what, hint = _first_line(exc), backend.damaged_hint
        raise DatabaseOpenError(f"cannot open database {_shown(database_url)}: {what} ({hint})") from None
    if encryption is not None:
        try:
            bind_cipher(engine, open_cipher(engine, encryption.key))
        except EncryptionKeyError as exc:
            engine.dispose()
            raise DatabaseOpenError(f"cannot open database {_shown(database_url)}: {exc}") from None
    return engine
