"""Postgres statements awaited on psycopg's async connections, instead of holding the event loop while they run.

A synchronous statement on the event loop's thread holds the whole loop until the server answers: its round trip,
the server's work and, for a write, its commit. A daemon on Postgres spent a third of its loop's time so, while
other agents' turns waited to compile a context or read a model's answer (`bench/RESULTS.md`, "Daemon CPU per
step, fifth pass"). The statements of a turn and of the daemon's inbox that are each their own transaction run
here instead: on psycopg `AsyncConnection`s in autocommit mode, a few per event loop, so the loop runs other work
while a statement is at the server, and several statements can be in flight at once. SQLite is not affected: a
SQLite statement is work in this process, with nothing to wait for (`AwaitedStatements.of` is None there).

A statement is SQL text with psycopg's `%(name)s` parameters, or a SQLAlchemy Core statement compiled once for the
engine's dialect (with its literal values and its types' bind processors, e.g. JSON). Parameters get the engine's
NUL rule (`state.engine.clean_parameters`); errors are SQLAlchemy's (`IntegrityError`, `DataError`,
`OperationalError` …), as the synchronous path raises them, so callers catch the same exceptions either way.

A statement once sent runs to its end, as a synchronous one does: a cancellation (a turn's deadline, a shutdown)
that comes while it is at the server is delivered at the caller's next await, after the result is returned. So a
step is never committed without the caller knowing it (the window adopts what the store holds).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import weakref
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

from sqlalchemy import event
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Engine
from sqlalchemy.sql import ClauseElement
from sqlalchemy.sql.compiler import SQLCompiler

from pagemind.runtime.crypto.columns import EncryptedJSON, EncryptedText
from pagemind.runtime.state.dialects import dialect
from pagemind.runtime.state.engine import clean_parameters
from pagemind.runtime.state.held import hung_off

if TYPE_CHECKING:
    import psycopg

# psycopg is imported with the first engine on Postgres, not with this module: a SQLite process never needs it
# (+10 MB, 50 ms).
ROW_SHAPES = {"tuple": "tuple_row", "mapping": "dict_row", "named": "namedtuple_row"}  # psycopg.rows factories
POOL_SIZE = 8  # connections per event loop and engine: statements beyond this many in flight wait for one
_ATTRIBUTE = "_pagemind_awaited_statements"  # hangs off the engine, as `state.held`'s connections do (see there)
T = TypeVar("T")


@dataclass(frozen=True)
class _Compiled:
    """A Core statement as psycopg runs it: its SQL, the values it binds itself, its parameters' processors."""

    sql: str
    defaults: dict[str, Any]
    processors: dict[str, Callable[[Any], Any]]
    opened: tuple[tuple[int, Callable[[Any], Any]], ...] = ()  # result columns sealed at rest: index, opener

    def rows(self, found: list[Any]) -> list[Any]:
        """The rows with their sealed columns opened (`runtime.crypto.columns`), in the shape they came in."""
        return [_open_row(row, self.opened) for row in found] if self.opened else found

    def parameters(self, given: Mapping[str, Any]) -> dict[str, Any]:
        merged = {**self.defaults, **given}
        for name, process in self.processors.items():
            if merged.get(name) is not None:
                merged[name] = process(merged[name])
        return merged


class _Pool:
    """The async connections of one event loop: taken for one statement, given back after it."""

    def __init__(self, connect: Callable[[], Any], size: int):
        self._connect = connect
        self._idle: list[psycopg.AsyncConnection] = []
        self._slots = asyncio.Semaphore(size)

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[psycopg.AsyncConnection]:
        import psycopg

        async with self._slots:
            conn = self._idle.pop() if self._idle else await self._connect()
            try:
                yield conn
            finally:  # a statement's error leaves the connection usable (autocommit); a lost one is replaced
                if conn.closed or conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
                    _close(conn)
                else:
                    self._idle.append(conn)

    def close(self) -> None:
        """Close every idle connection now (no await: also from `engine.dispose()` on any thread)."""
        idle, self._idle = self._idle, []
        for conn in idle:
            _close(conn)


def _close(conn: psycopg.AsyncConnection) -> None:
    """End the connection's session at once, without awaiting (libpq's `PQfinish`)."""
    with contextlib.suppress(Exception):
        conn.pgconn.finish()


class AwaitedStatements:
    """One Postgres engine's statements, awaited (see the module docstring). One per engine; `of` makes it."""

    def __init__(self, engine: Engine):
        import psycopg.rows

        self.engine = engine
        self._row_factories = {shape: getattr(psycopg.rows, name) for shape, name in ROW_SHAPES.items()}
        args, kwargs = engine.dialect.create_connect_args(engine.url)  # what the engine's own connections get
        self._connect_args = (tuple(args), {**kwargs, "autocommit": True})
        self._pools: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Pool] = weakref.WeakKeyDictionary()
        # Weakly: a statement built per call would otherwise be kept, compiled, for ever. Build them once.
        self._compiled: weakref.WeakKeyDictionary[ClauseElement, _Compiled] = weakref.WeakKeyDictionary()
        event.listen(engine, "engine_disposed", lambda _engine: self.close())  # dispose ends these sessions too

    @classmethod
    def of(cls, engine: Engine) -> AwaitedStatements | None:
        """The engine's awaited statements, or None when its database is not Postgres."""
        if not dialect(engine).awaits_statements:
            return None
        return hung_off(engine, _ATTRIBUTE, cls)

    def close(self) -> None:
        """Close the idle connections of every event loop."""
        for pool in list(self._pools.values()):
            pool.close()

    async def rows(
        self, statement: str | ClauseElement, params: Mapping[str, Any], *, shape: str = "tuple"
    ) -> list[Any]:
        """Run one statement (its own transaction) and return its rows, shaped as `ROW_SHAPES` says: tuples,
        "mapping"s (dicts by column name) or "named" tuples (attributes by column name, as SQLAlchemy's rows)."""
        sql, values = self.prepared(statement, params)
        found = await run_to_end(self._run(sql, values, self._row_factories[shape]))
        compiled = None if isinstance(statement, str) else self._compiled.get(statement)
        return compiled.rows(found) if compiled is not None else found

    async def first(
        self, statement: str | ClauseElement, params: Mapping[str, Any], *, shape: str = "tuple"
    ) -> Any | None:
        """The first row of `rows` (None when there is none)."""
        found = await self.rows(statement, params, shape=shape)
        return found[0] if found else None

    async def one(self, statement: str | ClauseElement, params: Mapping[str, Any], *, shape: str = "tuple") -> Any:
        """The row of a statement that always returns one (RETURNING of an insert that cannot skip, an aggregate);
        raises `NoResultFound` if it returned none."""
        found = await self.rows(statement, params, shape=shape)
        if not found:
            raise sa_exc.NoResultFound("the statement returned no row")
        return found[0]

    def prepared(self, statement: str | ClauseElement, params: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
        """The statement as psycopg runs it: its SQL text (a Core statement compiled once) and its values."""
        if isinstance(statement, str):
            return statement, clean_parameters(dict(params))
        compiled = self._compiled.get(statement)
        if compiled is None:
            compiled = self._compiled[statement] = _compile(statement, self.engine)
        return compiled.sql, clean_parameters(compiled.parameters(params))

    def _pool(self) -> _Pool:
        import psycopg

        loop = asyncio.get_running_loop()
        pool = self._pools.get(loop)
        if pool is None:
            args, kwargs = self._connect_args
            pool = self._pools[loop] = _Pool(lambda: psycopg.AsyncConnection.connect(*args, **kwargs), POOL_SIZE)
            weakref.finalize(loop, pool.close)  # a loop's connections end with it (each test has its own loop)
        return pool

    async def _run(self, sql: str, values: dict[str, Any], row_factory: Any) -> list[Any]:
        import psycopg

        try:
            async with self._pool().connection() as conn:
                async with conn.cursor(row_factory=row_factory) as cursor:
                    await cursor.execute(sql, values)
                    return await cursor.fetchall() if cursor.description is not None else []
        except psycopg.Error as exc:
            raise sa_exc.DBAPIError.instance(sql, values, exc, psycopg.Error, dialect=self.engine.dialect) from exc


class AwaitedSession:
    """One async connection of its own, for state that lives in a database session (advisory locks): its statements
    run one at a time, in order. Opened at its first statement, on the event loop that runs it."""

    def __init__(self, statements: AwaitedStatements):
        self._statements = statements
        self._conn: psycopg.AsyncConnection | None = None

    async def scalar(self, sql: str, params: Mapping[str, Any]) -> Any:
        """The first column of the statement's first row. On an error the session is closed (and everything it
        held with it) before the error is raised."""
        return await run_to_end(self._scalar(sql, clean_parameters(dict(params))))

    async def _scalar(self, sql: str, values: dict[str, Any]) -> Any:
        import psycopg

        try:
            if self._conn is None or self._conn.closed:
                args, kwargs = self._statements._connect_args
                self._conn = await psycopg.AsyncConnection.connect(*args, **kwargs)
            cursor = await self._conn.execute(sql, values)
            row = await cursor.fetchone()
            return row[0] if row is not None else None
        except psycopg.Error as exc:
            self.close()
            raise sa_exc.DBAPIError.instance(
                sql, values, exc, psycopg.Error, dialect=self._statements.engine.dialect
            ) from exc

    def close(self) -> None:
        """End the session now (the server lets go of what it held)."""
        if self._conn is not None:
            _close(self._conn)
            self._conn = None


def _compile(statement: ClauseElement, engine: Engine) -> _Compiled:
    """`statement` compiled once for the engine's dialect, with no expanding parameters (an `IN` over a Python list
    is rendered per execution: statements built once use literal values instead, as
    `scheduler.queue.inbox_item.is_open`)."""
    dialect = engine.dialect
    compiled = statement.compile(dialect=dialect)
    if not isinstance(compiled, SQLCompiler):  # DDL: no parameters, and never run here
        raise TypeError(f"not a statement with parameters: {type(statement).__name__}")
    if "POSTCOMPILE" in compiled.string:
        raise ValueError("a statement run awaited must not have expanding parameters (IN over a list)")
    processors: dict[str, Callable[[Any], Any]] = {}
    for name, bind in compiled.binds.items():
        process = bind.type.dialect_impl(dialect).bind_processor(dialect)
        if process is not None:
            processors[name] = process
    opened = tuple(
        (index, functools.partial(column.type.process_result_value, dialect=dialect))
        for index, column in enumerate(compiled._result_columns)
        if isinstance(column.type, EncryptedText | EncryptedJSON)
    )
    return _Compiled(compiled.string, dict(compiled.params), processors, opened)


def _open_row(row: Any, opened: tuple[tuple[int, Callable[[Any], Any]], ...]) -> Any:
    """A psycopg row (tuple, dict or named tuple) with the columns `opened` names opened."""
    if isinstance(row, dict):
        keys = list(row)
        return row | {keys[i]: open_(row[keys[i]]) for i, open_ in opened}
    values = list(row)
    for i, open_ in opened:
        values[i] = open_(values[i])
    return row._make(values) if hasattr(row, "_make") else tuple(values)


async def run_to_end(work: Coroutine[Any, Any, T]) -> T:
    """Await `work` (a coroutine) to its end even when the caller is cancelled meanwhile; then return its result
    (or raise its error) and deliver the cancellation at the caller's next await, as a synchronous call that
    cannot be interrupted would. A timeout (`asyncio.timeout`) still reads it as its own."""
    task = asyncio.ensure_future(work)
    try:
        return await asyncio.shield(task)
    except asyncio.CancelledError:
        while not task.done():
            with contextlib.suppress(asyncio.CancelledError):
                await asyncio.shield(task)
        current = asyncio.current_task()
        if current is None or task.cancelled():
            raise
        # The cancellation was consumed here; arm it again with the same count, for the next await to raise.
        current.uncancel()
        current.cancel()
        return task.result()
