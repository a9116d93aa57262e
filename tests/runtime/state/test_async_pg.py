"""Postgres statements awaited on psycopg's async connections (`runtime.state.async_pg`): the event loop runs on
while a statement is at the server, a statement once sent runs to its end even when its caller is cancelled,
errors are SQLAlchemy's, and Core statements run as the synchronous engine runs them."""

from __future__ import annotations

import asyncio
import uuid

import pytest
import sqlalchemy
from sqlalchemy import JSON, Column, Integer, MetaData, String, Table, bindparam, insert, literal, select
from sqlalchemy.exc import DataError, IntegrityError

from pagemind.runtime.state.async_pg import AwaitedSession, AwaitedStatements
from pagemind.runtime.state.engine import make_engine

on_postgres = pytest.mark.parametrize("database_url", ["postgres"], indirect=True)

metadata = MetaData()
notes = Table(
    "async_pg_notes",
    metadata,
    Column("id", Integer, primary_key=True),
    Column("text", String(50), unique=True),
    Column("detail", JSON),
)
INSERT = (
    insert(notes)
    .values(text=bindparam("p_text"), detail=bindparam("p_detail", type_=JSON))
    .returning(notes.c.id, notes.c.detail, literal("made").label("how"))
)


@pytest.fixture
def engine(database_url):
    engine = make_engine(database_url)
    metadata.create_all(engine)
    yield engine
    engine.dispose()


class BlockedBehindLock:
    """Another session holds an advisory lock, so a statement that takes it waits at the server until `release`."""

    def __init__(self, engine: sqlalchemy.Engine):
        self.engine, self.key = engine, uuid.uuid4().int % 2**31
        self.holder = engine.connect().execution_options(isolation_level="AUTOCOMMIT")
        self.holder.execute(sqlalchemy.text("SELECT pg_advisory_lock(:k)"), {"k": self.key})

    async def until_waiting(self) -> None:
        """Until a statement waits for the lock (bounded: a test that never gets there fails, it does not hang)."""
        query = sqlalchemy.text(
            "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted AND objid = :k"
        )
        for _ in range(500):
            with self.engine.connect() as conn:
                if conn.execute(query, {"k": self.key}).scalar():
                    return
            await asyncio.sleep(0.01)
        raise AssertionError("no statement came to wait for the lock")

    def release(self) -> None:
        self.holder.execute(sqlalchemy.text("SELECT pg_advisory_unlock(:k)"), {"k": self.key})
        self.holder.close()


@on_postgres
async def test_the_event_loop_runs_on_while_a_statement_waits_at_the_server(engine):
    awaited = AwaitedStatements.of(engine)
    lock = BlockedBehindLock(engine)
    statement = asyncio.create_task(awaited.first("SELECT pg_advisory_xact_lock(%(k)s), 42", {"k": lock.key}))
    await lock.until_waiting()  # this coroutine ran (and queried) while the statement was at the server
    assert not statement.done()
    lock.release()
    assert (await statement)[1] == 42


@on_postgres
async def test_a_statement_runs_to_its_end_and_the_cancellation_comes_at_the_next_await(engine):
    awaited = AwaitedStatements.of(engine)
    lock = BlockedBehindLock(engine)
    seen: list[object] = []

    async def insert_then_go_on() -> None:
        row = await awaited.first(
            "INSERT INTO async_pg_notes (text) SELECT 'kept' "
            "FROM (SELECT pg_advisory_xact_lock(%(k)s)) AS waited RETURNING id",
            {"k": lock.key},
        )
        seen.append(row)  # the caller gets the result, as it would from a synchronous call
        await asyncio.sleep(0)  # ... and the cancellation here
        seen.append("not reached")

    task = asyncio.create_task(insert_then_go_on())
    await lock.until_waiting()
    task.cancel()
    while not task.cancelling():
        await asyncio.sleep(0)
    lock.release()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert len(seen) == 1 and seen[0] is not None
    with engine.connect() as conn:
        assert conn.execute(select(notes.c.text)).scalars().all() == ["kept"]


@on_postgres
async def test_a_timeout_during_a_statement_is_still_the_timeouts_own(engine):
    awaited = AwaitedStatements.of(engine)
    lock = BlockedBehindLock(engine)
    rows: list[object] = []
    scopes: list[asyncio.Timeout] = []

    async def bounded() -> None:
        async with asyncio.timeout(None) as scope:
            scopes.append(scope)
            rows.append(await awaited.first("SELECT pg_advisory_xact_lock(%(k)s), 7", {"k": lock.key}))
            await asyncio.sleep(30)  # the timeout fires here at once; were it lost, the block would end without it

    task = asyncio.create_task(bounded())
    await lock.until_waiting()
    scopes[0].reschedule(asyncio.get_running_loop().time())  # the deadline passes while the statement waits
    while not task.cancelling():
        await asyncio.sleep(0)
    lock.release()
    with pytest.raises(TimeoutError):
        await task
    assert rows and rows[0][1] == 7


@on_postgres
async def test_errors_are_sqlalchemy_s_and_the_connection_serves_again(engine):
    awaited = AwaitedStatements.of(engine)
    await awaited.first(INSERT, {"p_text": "once", "p_detail": None})
    (pid,) = await awaited.first("SELECT pg_backend_pid()", {})
    with pytest.raises(IntegrityError):
        await awaited.first(INSERT, {"p_text": "once", "p_detail": None})
    with pytest.raises(DataError):
        await awaited.first("SELECT CAST('x' AS int)", {})
    assert (await awaited.first("SELECT pg_backend_pid()", {})) == (pid,)  # the same connection, not a new one


@on_postgres
async def test_a_core_statement_binds_its_types_and_literals_and_nul_as_the_engine_does(engine):
    awaited = AwaitedStatements.of(engine)
    row = await awaited.first(INSERT, {"p_text": "with\x00nul", "p_detail": {"a": [1, "two"]}}, shape="mapping")
    assert row["detail"] == {"a": [1, "two"]} and row["how"] == "made"
    with engine.connect() as conn:
        stored = conn.execute(select(notes.c.text, notes.c.detail)).one()
    assert tuple(stored) == ("with\ufffdnul", {"a": [1, "two"]})  # NUL replaced, JSON stored as JSON


@on_postgres
async def test_a_statement_with_an_expanding_parameter_is_refused(engine):
    awaited = AwaitedStatements.of(engine)
    with pytest.raises(ValueError, match="expanding"):
        await awaited.rows(select(notes.c.id).where(notes.c.text.in_(["a", "b"])), {})


@on_postgres
def test_each_event_loop_has_its_own_connections_and_dispose_ends_them(engine, database_url):
    awaited = AwaitedStatements.of(engine)
    assert AwaitedStatements.of(engine) is awaited
    pids = [asyncio.run(awaited.first("SELECT pg_backend_pid()", {}))[0] for _ in range(2)]
    assert pids[0] != pids[1]  # a closed loop's connection is not used by the next loop

    async def hold_idle() -> int:
        return (await awaited.first("SELECT pg_backend_pid()", {}))[0]

    loop = asyncio.new_event_loop()
    try:
        pid = loop.run_until_complete(hold_idle())
        engine.dispose()  # the loop is still open: its idle connection is ended all the same
        assert ended(database_url, pid)
        assert loop.run_until_complete(hold_idle()) != pid  # and a new one serves the next statement
    finally:
        loop.close()


def ended(database_url: str, pid: int) -> bool:
    """Whether the server's backend `pid` is gone (it exits right after its client hangs up: asked a few times)."""
    admin = sqlalchemy.create_engine(database_url)
    try:
        for _ in range(200):
            with admin.connect() as conn:
                if not conn.execute(
                    sqlalchemy.text("SELECT count(*) FROM pg_stat_activity WHERE pid = :p"), {"p": pid}
                ).scalar():
                    return True
        return False
    finally:
        admin.dispose()


def test_sqlite_has_no_awaited_statements(tmp_path):
    assert AwaitedStatements.of(make_engine(f"sqlite:///{tmp_path / 'x.db'}")) is None


@on_postgres
async def test_a_session_keeps_its_state_and_starts_again_after_it_dies(engine):
    session = AwaitedSession(AwaitedStatements.of(engine))
    assert await session.scalar("SELECT pg_try_advisory_lock(%(k)s)", {"k": 99})
    pid = await session.scalar("SELECT pg_backend_pid()", {})
    assert await session.scalar("SELECT pg_backend_pid()", {}) == pid  # the same session: the lock is held there
    with engine.connect() as conn:
        conn.execute(sqlalchemy.text("SELECT pg_terminate_backend(:p)"), {"p": pid})
    with pytest.raises(sqlalchemy.exc.OperationalError):
        await session.scalar("SELECT 1", {})
    assert await session.scalar("SELECT pg_backend_pid()", {}) != pid
    session.close()


@on_postgres
async def test_a_statement_built_per_call_is_not_kept_compiled(engine):
    import gc

    awaited = AwaitedStatements.of(engine)
    statement = select(notes.c.id).where(notes.c.text == bindparam("p_text"))
    await awaited.rows(statement, {"p_text": "none"})
    assert statement in awaited._compiled  # compiled once, reused while the statement lives
    del statement
    gc.collect()
    assert len(awaited._compiled) == 0
