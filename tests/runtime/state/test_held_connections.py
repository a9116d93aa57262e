"""Connections held open per thread (`runtime.state.held`): the store's one-statement work on Postgres runs on the
thread's autocommit connection, with no checkout per block; a failure throws that connection away."""

from __future__ import annotations

import contextlib
import gc
import threading
import weakref
from collections.abc import Iterator

import pytest
from sqlalchemy import create_engine, make_url, text
from sqlalchemy.exc import DBAPIError

from pagemind.runtime.state.held import read_connection, write_transaction
from pagemind.runtime.state.store import StateStore

PID = text("SELECT pg_backend_pid()")


def backend(store: StateStore) -> int:
    with store.one_statement() as conn:
        return conn.execute(PID).scalar_one()


@pytest.mark.postgres
@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
def test_one_statement_blocks_share_the_threads_connection_and_a_failure_replaces_it(database_url):
    store = StateStore.open(database_url)
    first = backend(store)
    assert backend(store) == first  # the same session: nothing checked out or reset in between
    with store.one_statement() as conn:  # autocommit: what a statement writes is committed when it returns
        conn.execute(text("CREATE TABLE held_probe (n int)"))
        conn.execute(text("INSERT INTO held_probe VALUES (1)"))
    other: list[int] = []
    thread = threading.Thread(target=lambda: other.append(backend(store)))
    thread.start()
    thread.join()
    assert other[0] != first  # another thread, its own connection
    with pytest.raises(DBAPIError), store.one_statement() as conn:
        conn.execute(text("SELECT 1 / 0"))
    replaced = backend(store)
    assert replaced != first
    with store.one_statement() as conn:
        assert conn.execute(text("SELECT n FROM held_probe")).scalar_one() == 1


@contextlib.contextmanager
def used_on_two_threads(engine) -> Iterator[list]:
    """A read and a write on this thread and on another, which lives until the block ends; the four connections,
    as the blocks saw them."""
    seen: list = []
    used, done = threading.Event(), threading.Event()

    def use() -> None:
        with read_connection(engine) as conn:
            seen.append(conn)
            conn.execute(text("SELECT 1"))
        with write_transaction(engine) as conn:
            seen.append(conn)
            conn.execute(text("SELECT 1"))

    def other() -> None:
        use()
        used.set()
        done.wait()

    use()
    thread = threading.Thread(target=other)
    thread.start()
    used.wait()
    try:
        yield seen
    finally:
        done.set()
        thread.join()


@pytest.mark.parametrize("database_url", ["sqlite", "postgres"], indirect=True)
def test_a_disposed_engine_is_freed_with_its_held_connections(database_url):
    """A checked-out connection keeps its pool, hence its engine, alive (SQLAlchemy keeps it to return it), so a
    held one would keep it for ever: `dispose` closes them, on every thread, and then nothing holds the engine (no
    thread's locals either: a live thread's locals are a root the collector cannot free)."""
    engine = create_engine(database_url)
    with used_on_two_threads(engine) as held:
        engine.dispose()
        assert all(conn.closed for conn in held)
    freed = weakref.ref(engine)
    del engine, held
    gc.collect()
    assert freed() is None


@pytest.mark.postgres
@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
def test_disposing_an_engine_ends_every_threads_held_sessions(database_url):
    """A disposed pool ends only its idle connections' sessions, and held ones are never idle: `dispose` ends
    theirs too, on every thread, and the next statement opens a new one."""
    engine = create_engine(database_url)
    name = make_url(database_url).query["application_name"]
    count = text("SELECT count(*) FROM pg_stat_activity WHERE application_name = :name")
    with used_on_two_threads(engine):
        with read_connection(engine) as conn:
            assert conn.execute(count, {"name": name}).scalar_one() == 4
        engine.dispose()
        with read_connection(engine) as conn:
            assert conn.execute(count, {"name": name}).scalar_one() == 1  # this one, new
    engine.dispose()
