"""`pagemind serve --workers 2` (issue 12: use both cores): two daemon processes on one port and one Postgres. Both
take turns, each message is done once, and one agent's messages — sent at once over separate connections, so
they reach both workers — run one at a time in arrival order. SIGTERM stops both, exit 0; SQLite is refused."""

from __future__ import annotations

import os
import signal
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
import sqlalchemy

from pagemind.runtime.state.tables.conversation import MessageRow
from pagemind.runtime.state.tables.daemon import inbox
from tests.scheduler.test_serve import environment, pagemind, start_serve, stop, stub  # noqa: F401 (fixtures)
from tests.support.daemon_support import wait_until

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


def workers_of(supervisor: int) -> set[int]:
    """The supervisor's worker processes (Linux: `--workers` needs `SO_REUSEPORT` and is tested there)."""
    return {int(pid) for pid in Path(f"/proc/{supervisor}/task/{supervisor}/children").read_text().split()}


def listening(pid: int, port: int) -> bool:
    """Whether process `pid` holds a socket listening on `port` (its fds' socket inodes, in /proc/net/tcp)."""
    try:
        inodes = {os.readlink(fd.as_posix()) for fd in Path(f"/proc/{pid}/fd").iterdir()}
    except OSError:  # gone, or an fd closed while read
        return False
    for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
        fields = line.split()
        if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] == "0A" and f"socket:[{fields[9]}]" in inodes:
            return True
    return False


def both_listening(supervisor: int, port: int) -> set[int] | None:
    workers = workers_of(supervisor)
    return workers if len(workers) == 2 and all(listening(pid, port) for pid in workers) else None


class Client(threading.Thread):
    """Probes `/v1/ready` and sends one async message (its own idempotency key, resent with the same key after a
    cut connection) per round, each on a new connection, until told to stop; records what it saw."""

    def __init__(self, url: str):
        super().__init__(daemon=True)
        self.url, self.done = url, threading.Event()
        self.ready_answers, self.failed_in_a_row, self.worst_run = 0, 0, 0
        self.accepted: dict[str, str] = {}  # content → run id
        self.problems: list[str] = []

    def call(self, method: str, path: str, **kwargs: Any) -> httpx.Response | None:
        for _ in range(3):  # a connection in a killed worker's accept queue is reset: a new one reaches another
            try:
                with httpx.Client(base_url=self.url, timeout=30) as client:
                    return client.request(method, path, **kwargs)
            except httpx.TransportError as exc:
                self.failed_in_a_row += 1
                self.worst_run = max(self.worst_run, self.failed_in_a_row)
                self.problems.append(f"{method} {path}: {exc!r}")
        return None

    def run(self) -> None:
        n = 0
        while not self.done.is_set():
            ready = self.call("GET", "/v1/ready")
            if ready is not None and ready.status_code == 200:
                self.ready_answers, self.failed_in_a_row = self.ready_answers + 1, 0
            elif ready is not None:
                self.problems.append(f"ready answered {ready.status_code}")
            content = f"message {n}"
            sent = self.call(
                "POST",
                "/v1/agents/steady/messages",
                json={"content": content, "mode": "async", "idempotency_key": content},
            )
            if sent is not None and sent.status_code == 202:
                self.accepted[content] = sent.json()["run_id"]
            else:
                self.problems.append(f"{content} not accepted: {None if sent is None else sent.text}")
            n += 1


@pytest.mark.postgres
@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
def test_a_worker_killed_again_and_again_right_after_its_restart_never_takes_the_service_down(
    environment,  # noqa: F811 (a fixture)
    database_url,
):
    folder, env = environment
    process, url = start_serve(folder, {**env, "DATABASE_URL": database_url}, "--workers", "2")
    engine = sqlalchemy.create_engine(database_url)
    client = Client(url)
    try:
        post(url, "/v1/agents", {"template": "companion", "name": "steady"})
        port = int(url.rsplit(":", 1)[1])
        client.start()
        for _ in range(3):  # a worker dies; its replacement dies at once, well within the old STARTUP_S
            before = wait_until(lambda: both_listening(process.pid, port), "both workers listening")
            victim = min(before)
            os.kill(victim, signal.SIGKILL)
            replacement = wait_until(lambda b=before: workers_of(process.pid) - b, "the replacement worker").pop()
            os.kill(replacement, signal.SIGKILL)
            gone = before | {replacement}
            wait_until(lambda g=gone: len(workers_of(process.pid) - g) == 1, "another replacement")
            assert process.poll() is None  # the supervisor serves on
        answered = client.ready_answers
        wait_until(lambda: client.ready_answers > answered + 5, "readiness answered after the kills")
        client.done.set()
        client.join(60)
        # A connection the killed worker held is reset, closed, or (when it had read the request) cut before the
        # answer ("Server disconnected without sending a response"): each is a transport error the next try
        # survives; anything else (an error status, a refused message) is a failure.
        cut = ("reset", "closed", "disconnected without sending a response")
        assert not [p for p in client.problems if not any(word in p.lower() for word in cut)], client.problems
        assert client.worst_run <= 1  # a cut connection is answered on the next one: /ready never went away
        runs = set(client.accepted.values())
        assert len(client.accepted) > 3

        def all_done() -> bool:
            with engine.connect() as conn:
                states = conn.execute(sqlalchemy.select(inbox.c.run_id, inbox.c.state).where(inbox.c.run_id.in_(runs)))
                return {row.run_id for row in states if row.state == "done"} == runs

        wait_until(all_done, "every accepted message to be done", deadline_s=120)
        with engine.connect() as conn:
            agent_id = conn.execute(sqlalchemy.text("SELECT id FROM agents WHERE name = 'steady'")).scalar_one()
            users = (
                conn.execute(
                    sqlalchemy.select(messages.c.content).where(
                        messages.c.agent_id == agent_id, messages.c.role == "user"
                    )
                )
                .scalars()
                .all()
            )
    finally:
        client.done.set()
        engine.dispose()
        code, err = stop(process)
    assert sorted(users) == sorted(client.accepted)  # each accepted message ran once: none lost, none doubled
    assert code == 0, err
    assert err.count("starting another") == 6 and "at its start; stopping" not in err
