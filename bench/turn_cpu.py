"""CPU the daemon spends per turn outside the model: inbox, turn, state store (issues 11 and 12).

An in-process daemon, 20 agents made from a template, an instant model (one `send_message` step per turn), 200
turns submitted at once; CPU time (process_time) over the whole batch divided by the turns. SQLite on local disk,
and PostgreSQL when DATABASE_URL or the local test server answers (a fresh schema). Writes its block of
bench/RESULTS.md unless --no-write (to measure another checkout with the same module: run it with that
checkout's interpreter, from this checkout's root).

    python -m bench.turn_cpu [--turns 200] [--runs 3] [--no-write]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
import uuid
from pathlib import Path

import sqlalchemy

from bench.common import machine_note, median, write_section
from pagemind.runtime.process.logs import configure_logging
from pagemind.runtime.process.settings import Settings
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.models import FunctionModel, by_purpose
from pagemind.runtime.testing.responses import tool_call_body
from pagemind.scheduler.catalog import AgentCatalog
from pagemind.scheduler.daemon import Daemon
from pagemind.scheduler.daemon_config import DaemonConfig
from tests.support.daemon_support import write_agents

POSTGRES = os.environ.get("DATABASE_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
AGENTS = 20


async def measure(url: str, turns: int, home: Path) -> float:
    """CPU ms per turn over `turns` turns (after one warm-up turn per agent)."""
    model = FunctionModel(by_purpose(lambda _request: tool_call_body("send_message", {"message": "ok"}, call_id="c1")))
    store = StateStore.open(url)
    daemon = Daemon(
        AgentCatalog(write_agents(home / "agents", ()), store), Settings.from_env(), config=DaemonConfig(), model=model
    )
    for i in range(AGENTS):
        daemon.create_agent(f"u{i}", template="companion")
    await daemon.start()
    try:
        for item in [await daemon.submit(f"u{i}", "warm up") for i in range(AGENTS)]:
            await daemon.wait(item.run_id, 60)
        started = time.process_time()
        items = [await daemon.submit(f"u{i % AGENTS}", f"message {i}") for i in range(turns)]
        for item in items:
            await daemon.wait(item.run_id, 120)
        return (time.process_time() - started) * 1000 / turns
    finally:
        await daemon.stop()
        store.engine.dispose()


def postgres_schema() -> tuple[str, sqlalchemy.Engine] | None:
    """A fresh schema's URL on the test server, or None when it does not answer."""
    try:
        admin = sqlalchemy.create_engine(POSTGRES)
        schema = f"bench_{uuid.uuid4().hex[:10]}"
        with admin.begin() as conn:
            conn.execute(sqlalchemy.text(f"CREATE SCHEMA {schema}"))
    except Exception:
        return None
    return f"{POSTGRES}?options=-csearch_path%3D{schema}", admin


def run(database: str, turns: int, home: Path) -> float | None:
    """One measurement on a fresh database of this kind."""
    if database == "sqlite":
        return asyncio.run(measure(f"sqlite:///{home / 'pagemind.db'}", turns, home))
    found = postgres_schema()
    if found is None:
        return None
    url, admin = found
    try:
        return asyncio.run(measure(url, turns, home))
    finally:
        with admin.begin() as conn:
            conn.execute(sqlalchemy.text(f"DROP SCHEMA {url.rsplit('%3D', 1)[1]} CASCADE"))
        admin.dispose()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    configure_logging("ERROR")
    note, rows = machine_note(), []
    for database in ("sqlite", "postgres"):
        costs = []
        for _ in range(args.runs):
            with tempfile.TemporaryDirectory() as tmp:
                os.environ["PAGEMIND_HOME"] = tmp
                cost = run(database, args.turns, Path(tmp))
            if cost is None:
                break
            costs.append(cost)
        if costs:
            rows.append((database, median(costs), costs))
            print(f"{database:>8}: median {rows[-1][1]:.1f} ms CPU per turn ({', '.join(f'{c:.1f}' for c in costs)})")
    if args.no_write:
        return
    table = "\n".join(f"| {db} | {cost:.1f} | {', '.join(f'{c:.1f}' for c in costs)} |" for db, cost, costs in rows)
    write_section(
        "turn_cpu",
        "CPU per turn, daemon in process",
        f"""
{note}; {AGENTS} agents, {args.turns} one-step turns per run, instant model, {args.runs} runs per database.
CPU = the process's CPU time over the batch (inbox submit/claim/finish, the turn, the state store) per turn.

| database | median ms CPU/turn | runs |
| --- | --- | --- |
{table}
""",
    )


if __name__ == "__main__":
    main()
