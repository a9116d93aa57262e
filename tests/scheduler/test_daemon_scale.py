"""Several daemon processes on one database (issue 12, item 8), and a graceful stop (item 7).

The daemons are child processes (tests/support/daemon_child.py) with the ledger model: a message `msg N` appends `[N]` to
the agent's `human` block and answers `ack N`, so a turn run twice, lost or out of order shows in the block.
"""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import func, select

from pagemind.runtime.process.settings import Settings
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.state.tables.daemon import agent_leases, daemons
from pagemind.scheduler.catalog import AgentCatalog
from pagemind.scheduler.daemon import Daemon
from tests.support.daemon_support import TEMPLATE, markers, wait_until, write_agents

ROOT = Path(__file__).parents[2]


def _client(tmp_path: Path, url: str, folder: Path) -> Daemon:
    """A daemon object that is never started: it submits and reads, as an API process would."""
    settings = Settings.from_env({"PAGEMIND_HOME": str(tmp_path / "home"), "DATABASE_URL": url})
    return Daemon(AgentCatalog(folder, StateStore.open(settings.database_url)), settings)


def _spawn(tmp_path: Path, url: str, folder: Path, mode: str) -> subprocess.Popen:
    env = {**os.environ, "PAGEMIND_KILL_AT": ""}
    return subprocess.Popen(
        [sys.executable, "-m", "tests.support.daemon_child", str(tmp_path / "home"), url, str(folder), mode],
        cwd=ROOT,
        env=env,
    )


def _count(client: Daemon, table) -> int:
    with client.store.engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(table)).scalar()


def _check_ledger(client: Daemon, sent: dict[str, list[str]]) -> None:
    """Every message done once, in its agent's order, its edit applied once."""
    for name, numbers in sent.items():
        record = client.store.get_agent(name)
        items = client.inbox.items(record.id)
        assert [i.content for i in items] == [f"msg {n}" for n in numbers]
        assert all(i.state == "done" and i.result["reply"] == f"ack {n}" for i, n in zip(items, numbers))
        for before, after in zip(items, items[1:]):
            assert before.finished_at <= after.started_at, name  # one at a time, oldest first
        human = {b.label: b.value for b in client.store.load_blocks(record.id, client.catalog.spec_for(name))}
        assert markers(human["human"]) == numbers, name
        users = [m.content for m in client.store.all_messages(record.id) if m.role == "user"]
        assert users == [f"msg {n}" for n in numbers], name


@pytest.mark.postgres
@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
def test_two_daemons_share_twenty_agents_each_message_once_in_order(tmp_path, database_url):
    make_engine(database_url).dispose()
    folder = write_agents(tmp_path / "agents", yaml_agents=())
    client = _client(tmp_path, database_url, folder)
    names = [f"u{n}" for n in range(20)]
    for name in names:
        client.create_agent(name, template=TEMPLATE)
    children = [_spawn(tmp_path, database_url, folder, "until:400") for _ in range(2)]
    try:
        wait_until(
            lambda: _count(client, daemons) == 2, "both daemons to serve", 120
        )  # both serving before the stream starts
        sent: dict[str, list[str]] = {name: [] for name in names}
        for n in range(400):
            name = names[n % 20]
            asyncio.run(client.submit(name, f"msg {n}"))
            sent[name].append(str(n))
        assert [child.wait(timeout=300) for child in children] == [0, 0]
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
    items = client.inbox.items()
    assert len(items) == 400 and all(i.attempts == 1 for i in items)  # no item claimed twice
    _check_ledger(client, sent)
    assert _count(client, agent_leases) == 0 and _count(client, daemons) == 0


def test_sigterm_stops_gracefully_and_loses_nothing(tmp_path, database_url):
    make_engine(database_url).dispose()
    folder = write_agents(tmp_path / "agents", yaml_agents=("alice", "bob", "carol"))
    client = _client(tmp_path, database_url, folder)
    sent: dict[str, list[str]] = {"alice": [], "bob": [], "carol": []}
    daemon = _spawn(tmp_path, database_url, folder, "serve")
    try:
        for n in range(60):
            name = ("alice", "bob", "carol")[n % 3]
            asyncio.run(client.submit(name, f"msg {n}"))
            sent[name].append(str(n))
        wait_until(lambda: sum(i.state == "done" for i in client.inbox.items()) >= 5, "5 items done", 120)
        daemon.send_signal(signal.SIGTERM)
        assert daemon.wait(timeout=60) == 0
    finally:
        if daemon.poll() is None:
            daemon.kill()
    states = {i.state for i in client.inbox.items()}
    assert states <= {"done", "pending"}  # nothing left running, nothing failed
    assert _count(client, agent_leases) == 0 and _count(client, daemons) == 0
    drain = _spawn(tmp_path, database_url, folder, "drain")
    assert drain.wait(timeout=120) == 0
    _check_ledger(client, sent)
