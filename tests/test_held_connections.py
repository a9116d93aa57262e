"""Connections held open per thread (`runtime.state.held`): the store's one-statement work on Postgres runs on the
thread's autocommit connection, with no checkout per block; a failure throws that connection away."""

from __future__ import annotations

import threading

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

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
