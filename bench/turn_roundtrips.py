"""Database round trips and CPU per turn of an in-process daemon (issue 12): where a turn's waits on the database
come from, by caller, to compare checkouts (run it with each checkout's interpreter).

10 agents made from a template, each sending its next message once the last is answered (as a user does), an
instant model answering each turn in two steps (`memory_rethink`, then `send_message`). Every wait of the
Postgres driver (psycopg `Connection.wait`: a statement, a commit, or a local no-op such as switching autocommit)
is counted by the daemon code that caused it. Postgres by default (DATABASE_URL or the local test server, a
fresh schema); `--sqlite` for SQLite (CPU only). Prints; writes nothing.

    python -m bench.turn_roundtrips [--turns 200] [--agents 10] [--sqlite]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import sys
import tempfile
import time
import uuid
from pathlib import Path

import psycopg
import sqlalchemy

from bench.common import ROOT
from pagemind.runtime.process.logs import configure_logging
from pagemind.runtime.process.settings import Settings
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.models import FunctionModel, by_purpose
from pagemind.runtime.testing.responses import tool_call_body
from pagemind.scheduler.catalog import AgentCatalog
from pagemind.scheduler.daemon import Daemon
from tests.support.daemon_support import write_agents

POSTGRES = os.environ.get("DATABASE_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
NETWORK = ("_execute_gen", "_commit_gen", "_exec_command")  # driver waits that go to the server
waits: collections.Counter[str] = collections.Counter()
counting = [False]
_wait = psycopg.Connection.wait


def _caller() -> str:
    frame, chain = sys._getframe(2), []
    while frame is not None and len(chain) < 2:
        name = frame.f_code.co_filename
        if str(ROOT) in name and ".venv" not in name and "site-packages" not in name:
            chain.append(frame.f_code.co_name)
        frame = frame.f_back
    return " < ".join(chain)


def counted_wait(self, gen, *args, **kwargs):
    if counting[0]:
        waits[f"{_caller()} [{getattr(gen, '__qualname__', '?').rsplit('.', 1)[-1]}]"] += 1
    return _wait(self, gen, *args, **kwargs)


def step(request):
    last = [m for m in request.messages if m["role"] in ("user", "tool")][-1]
    if last["role"] == "user":
        return tool_call_body("memory_rethink", {"label": "human", "new_value": f"Said: {str(last['content'])[:40]}"})
    return tool_call_body("send_message", {"message": "ok"})


async def measure(url: str, turns: int, agents: int, home: Path) -> float:
    """CPU ms per turn (after one warm-up turn per agent); fills `waits`."""
    store = StateStore.open(url)
    daemon = Daemon(
        AgentCatalog(write_agents(home / "agents", ()), store),
        Settings.from_env(),
        model=FunctionModel(by_purpose(step)),
    )
    for i in range(agents):
        daemon.create_agent(f"u{i}", template="companion")
    await daemon.start()
    try:
        for item in [await daemon.submit(f"u{i}", "warm up") for i in range(agents)]:
            await daemon.wait(item.run_id, 60)

        async def user(i: int) -> None:
            for k in range(turns // agents):
                item = await daemon.submit(f"u{i}", f"message {k}")
                await daemon.wait(item.run_id, 120)

        counting[0], started = True, time.process_time()
        await asyncio.gather(*(user(i) for i in range(agents)))
        cpu, counting[0] = time.process_time() - started, False
        return cpu * 1000 / (turns // agents * agents)
    finally:
        await daemon.stop()
        store.engine.dispose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--agents", type=int, default=10)
    parser.add_argument("--sqlite", action="store_true")
    args = parser.parse_args()
    configure_logging("ERROR")
    psycopg.Connection.wait = counted_wait  # type: ignore[method-assign]
    turns = args.turns // args.agents * args.agents
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["PAGEMIND_HOME"] = tmp
        if args.sqlite:
            cpu = asyncio.run(measure(f"sqlite:///{tmp}/pagemind.db", turns, args.agents, Path(tmp)))
        else:
            admin = sqlalchemy.create_engine(POSTGRES, isolation_level="AUTOCOMMIT")
            schema = f"bench_{uuid.uuid4().hex[:10]}"
            with admin.connect() as conn:
                conn.execute(sqlalchemy.text(f"CREATE SCHEMA {schema}"))
            try:
                cpu = asyncio.run(
                    measure(f"{POSTGRES}?options=-csearch_path%3D{schema}", turns, args.agents, Path(tmp))
                )
            finally:
                with admin.connect() as conn:
                    conn.execute(sqlalchemy.text(f"DROP SCHEMA {schema} CASCADE"))
                admin.dispose()
    network = sum(n for key, n in waits.items() if key.endswith(tuple(f"[{g}]" for g in NETWORK)))
    print(
        f"{turns} turns, {args.agents} agents: {cpu:.2f} ms CPU per turn; driver waits per turn "
        f"{sum(waits.values()) / turns:.1f}, of them statements and commits {network / turns:.1f}"
    )
    for key, n in waits.most_common():
        print(f"{n / turns:6.2f}  {key}")


if __name__ == "__main__":
    main()
