"""The inbox keeps every finished item, so the statements that look for an agent's open items must find them by
index however long the history grows — also under a prepared statement's generic plan, which is what psycopg's
prepared statements get after a few executions. The open states are written into the SQL as constants
(`scheduler.queue.inbox_item.is_open`): as bound values the generic plan could not see how rare open items are and
scanned the table."""

from __future__ import annotations

import re

import pytest
import sqlalchemy as sa
from psycopg.sql import Literal
from sqlalchemy.dialects import postgresql

from pagemind.runtime.state.store import StateStore
from pagemind.scheduler.queue.arrivals import OPEN_WORK
from pagemind.scheduler.queue.inbox import Inbox
from pagemind.scheduler.queue.inbox_statements import CLAIM_HEAD
from pagemind.scheduler.queue.leases import Leases

pytestmark = pytest.mark.parametrize("database_url", ["postgres"], indirect=True)


def numbered(statement) -> tuple[str, list[str]]:
    """The statement's Postgres SQL with `$n` placeholders (for PREPARE), and the parameter names in order."""
    sql = str(statement.compile(dialect=postgresql.dialect()))
    names: list[str] = []

    def number(match: re.Match) -> str:
        if match.group(1) not in names:
            names.append(match.group(1))
        return f"${names.index(match.group(1)) + 1}"

    return re.sub(r"%\((\w+)\)s", number, sql), names


@pytest.fixture
def engine(database_url):
    store = StateStore.open(database_url)
    with store.engine.begin() as conn:  # 20,000 finished items of 100 agents, and one open item
        conn.execute(
            sa.text(
                "INSERT INTO inbox (run_id, agent_id, kind, content, state, attempts, created_at) "
                "SELECT md5(g::text), 1 + g % 100, 'message', 'x', 'done', 1, now() FROM generate_series(1, 20000) g"
            )
        )
        conn.execute(
            sa.text(
                "INSERT INTO inbox (run_id, agent_id, kind, content, state, attempts, created_at) "
                "VALUES ('open', 7, 'message', 'x', 'pending', 0, now())"
            )
        )
        conn.execute(sa.text("ANALYZE inbox"))
    yield store.engine
    store.engine.dispose()


def generic_plan(engine, statement, values: dict) -> str:
    sql, names = numbered(statement)
    with engine.connect() as conn:
        raw = conn.connection.driver_connection
        raw.execute("SET plan_cache_mode = force_generic_plan")
        raw.execute(f"PREPARE probe AS {sql}")
        literals = ", ".join(Literal(values[name]).as_string(raw) for name in names)
        plan = "\n".join(row[0] for row in raw.execute(f"EXPLAIN EXECUTE probe({literals})"))
        raw.execute("DEALLOCATE probe")
        raw.rollback()
    return plan


def test_claiming_finishing_and_looking_for_open_items_never_scan_the_inbox(engine):
    now = "2026-12-01 00:00:00+00"
    base = {
        "p_agent_id": 7,
        "p_owner": "me",
        "p_until": now,
        "p_now": now,
        "param_1": 1,
        "state": "running",
        "attempts_1": 1,
        "lease_expires_at": None,
        "pg_notify_1": "pagemind_done",
    }
    statements = {
        "claim": (CLAIM_HEAD, base),
        "finish": (
            Inbox(engine)._statements.finish,
            {**base, "p_id": 1, "p_state": "done", "p_result": None, "p_error": None},
        ),
        "an arrival's look": (sa.select(OPEN_WORK), base),
        "a released lease's look": (Leases(engine, "me", 30)._statements.has_open_read, base),
    }
    for name, (statement, values) in statements.items():
        plan = generic_plan(engine, statement, values)
        assert "Seq Scan on inbox" not in plan, f"{name}:\n{plan}"
