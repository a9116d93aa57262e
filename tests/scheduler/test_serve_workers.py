"""`pagemind serve --workers 2` (issue 12: use both cores): two daemon processes on one port and one Postgres. Both
take turns, each message is done once, and one agent's messages — sent at once over separate connections, so
they reach both workers — run one at a time in arrival order. SIGTERM stops both, exit 0; SQLite is refused."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
import sqlalchemy

from pagemind.runtime.state.tables import MessageRow, inbox
from tests.scheduler.test_serve import environment, pagemind, start_serve, stop, stub  # noqa: F401 (fixtures)

messages = MessageRow.__table__  # type: ignore[attr-defined]


def post(url: str, path: str, body: dict) -> dict:
    """One request on a connection of its own: `SO_REUSEPORT` spreads connections, not requests, over workers."""
    with httpx.Client(base_url=url, timeout=120) as client:
        response = client.post(path, json=body)
    assert response.status_code in (200, 201, 202), response.text
    return response.json()


@pytest.mark.postgres
@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
def test_two_workers_take_turns_each_message_once_in_order(environment, database_url):  # noqa: F811
    folder, env = environment
    process, url = start_serve(folder, {**env, "DATABASE_URL": database_url}, "--workers", "2")
    engine = sqlalchemy.create_engine(database_url)
    try:
        post(url, "/v1/agents", {"template": "companion", "name": "ordered"})
        # Ten messages to one agent at once (async: each answered once it is in the inbox), over ten connections.
        with ThreadPoolExecutor(10) as pool:
            runs = list(
                pool.map(
                    lambda i: post(url, "/v1/agents/ordered/messages", {"content": f"message {i}", "mode": "async"}),
                    range(10),
                )
            )
        assert len({run["run_id"] for run in runs}) == 10
        # More agents, one message each on a new connection, until both workers have run a turn.
        owners: set[str] = set()
        for n in range(200):
            post(url, "/v1/agents", {"template": "companion", "name": f"u{n}"})
            done = post(url, f"/v1/agents/u{n}/messages", {"content": f"hello {n}", "timeout_s": 120})
            assert done["state"] == "done" and done["reply"] == f"echo: hello {n}"
            with engine.connect() as conn:
                # Claimed items only: the ordered agent's items still waiting have no owner yet.
                owners = set(
                    conn.execute(
                        sqlalchemy.select(inbox.c.owner).distinct().where(inbox.c.owner.is_not(None))
                    ).scalars()
                )
            if len(owners) >= 2:
                break
        assert len(owners) == 2  # two workers (daemon ids name host, pid and a random part)
        # The agent's last message is done only after the ten before it (they run in order).
        assert post(url, "/v1/agents/ordered/messages", {"content": "last", "timeout_s": 120})["state"] == "done"
        with engine.connect() as conn:
            agent_id = conn.execute(sqlalchemy.text("SELECT id FROM agents WHERE name = 'ordered'")).scalar_one()
            items = conn.execute(
                sqlalchemy.select(inbox).where(inbox.c.agent_id == agent_id).order_by(inbox.c.id)
            ).all()
            users = (
                conn.execute(
                    sqlalchemy.select(messages.c.content)
                    .where(messages.c.agent_id == agent_id, messages.c.role == "user")
                    .order_by(messages.c.id)
                )
                .scalars()
                .all()
            )
    finally:
        engine.dispose()
        code, err = stop(process)
    assert code == 0, err
    assert [i.state for i in items] == ["done"] * 11 and all(i.attempts == 1 for i in items)
    assert users == [i.content for i in items]  # each message once, in arrival (inbox) order
    for before, after in zip(items, items[1:]):  # one at a time: each started after the one before it ended
        assert after.started_at >= before.finished_at


def test_workers_need_postgres(environment):  # noqa: F811
    folder, env = environment
    result = pagemind(env, "serve", str(folder), "--workers", "2", timeout=60)
    assert result.returncode != 0 and "--workers needs PostgreSQL" in result.stderr


@pytest.mark.postgres
@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
def test_workers_that_cannot_bind_stop_the_serve_with_an_error(environment, database_url):  # noqa: F811
    import socket

    folder, env = environment
    with socket.socket() as taken:  # a plain listener (no SO_REUSEPORT) holds the port
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = pagemind(
            {**env, "DATABASE_URL": database_url},
            "serve",
            str(folder),
            "--port",
            str(port),
            "--workers",
            "2",
            timeout=120,
        )
    assert result.returncode != 0
    assert f"cannot listen on 127.0.0.1:{port}" in result.stderr and "at its start; stopping" in result.stderr
