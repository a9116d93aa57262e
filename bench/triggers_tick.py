"""What a trigger tick costs the daemon with many agents made from one template (cron + idle triggers).

N agents are stored at once (SQL, not through the API) with one finished message each; then the daemon ticks:
the first tick records every trigger's first sighting, the steady ticks find nothing due (what the loop does at
least every 30 s), and the 09:00 tick submits one inbox item per agent. Writes its block of bench/RESULTS.md.

    python -m bench.triggers_tick [--sizes 100,1000,10000] [--postgres URL]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path

import sqlalchemy
import yaml

from bench.common import machine_note, median, write_section
from pagemind.runtime.process.logs import configure_logging
from pagemind.runtime.process.settings import Settings
from pagemind.runtime.spec.loading import load_spec
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.state.tables.agents import AgentRow
from pagemind.runtime.state.tables.daemon import agent_origins, inbox
from pagemind.runtime.testing.clock import ManualClock
from pagemind.runtime.testing.specs import spec_data
from pagemind.scheduler.catalog import AgentCatalog
from pagemind.scheduler.daemon import Daemon

START = datetime(2026, 11, 30, 8, 0, tzinfo=UTC)
STEADY_TICKS = 5


def seed(store: StateStore, folder: Path, count: int) -> None:
    """The template and `count` agents made from it, each with one finished message 5 minutes before START."""
    data = spec_data(
        "companion",
        template=True,
        schedule=[{"cron": "0 9 * * *", "message": "Good morning"}],
        idle={"after": "2h", "run": "compact"},
    )
    (folder / "companion.yaml").write_text(yaml.safe_dump(data, sort_keys=False))
    template = load_spec(folder / "companion.yaml")
    agents, origins, items = [], [], []
    for i in range(count):
        spec = template.model_copy(update={"name": f"companion-u{i}", "template": False})
        agents.append(
            {
                "name": spec.name,
                "spec_hash": spec.spec_hash(),
                "spec_json": spec.model_dump_json(),
                "summary": "",
                "pressure_warned": False,
                "token_correction": 1.0,
                "created_at": START,
                "updated_at": START,
            }
        )
    with store.engine.begin() as conn:
        conn.execute(AgentRow.__table__.insert(), agents)
        ids = dict(conn.execute(sqlalchemy.select(AgentRow.__table__.c.name, AgentRow.__table__.c.id)).all())
        for i in range(count):
            agent_id = ids[f"companion-u{i}"]
            origins.append({"agent_id": agent_id, "template": "companion", "blocks": {}, "created_at": START})
            items.append(
                {
                    "run_id": uuid.uuid4().hex,
                    "agent_id": agent_id,
                    "kind": "message",
                    "content": "hi",
                    "state": "done",
                    "attempts": 1,
                    "created_at": START - timedelta(minutes=6),
                    "finished_at": START - timedelta(minutes=5),
                }
            )
        conn.execute(agent_origins.insert(), origins)
        conn.execute(inbox.insert(), items)


async def measure(url: str, count: int, home: Path) -> dict[str, float]:
    folder = home / f"agents-{count}"
    folder.mkdir()
    store = StateStore(make_engine(url))
    seed(store, folder, count)
    clock = ManualClock(START)
    daemon = Daemon(AgentCatalog(folder, store), Settings(home=home, database_url=url), clock=clock)
    timed: dict[str, float] = {}
    began = time.perf_counter()
    await daemon.tick(clock())
    timed["first"] = time.perf_counter() - began
    steady = []
    for _ in range(STEADY_TICKS):
        began = time.perf_counter()
        await daemon.tick(clock.advance(seconds=30))
        steady.append(time.perf_counter() - began)
    timed["steady"] = median(steady)
    began = time.perf_counter()
    await daemon.tick(clock.advance(START + timedelta(hours=1) - clock()))  # 09:00: every agent's cron fires
    timed["fire"] = time.perf_counter() - began
    assert daemon.triggers.fired_count == count, daemon.triggers.fired_count
    store.engine.dispose()
    return timed


def postgres_database(admin_url: str) -> tuple[str, callable]:
    """A fresh schema on the server (dropped afterwards) and the URL that uses it."""
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    admin = sqlalchemy.create_engine(admin_url)
    with admin.begin() as conn:
        conn.execute(sqlalchemy.text(f"CREATE SCHEMA {schema}"))

    def drop() -> None:
        with admin.begin() as conn:
            conn.execute(sqlalchemy.text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()

    return f"{admin_url}?options=-csearch_path%3D{schema}", drop


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="100,1000,10000")
    parser.add_argument("--postgres", default="postgresql+psycopg://postgres@127.0.0.1:5432/test")
    args = parser.parse_args()
    configure_logging("WARNING")
    note = machine_note()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for count in (int(s) for s in args.sizes.split(",")):
            for backend in ("sqlite", "postgres"):
                home = Path(tmp) / f"{backend}-{count}"
                home.mkdir()
                drop = None
                url = f"sqlite:///{home / 'pagemind.db'}"
                if backend == "postgres":
                    url, drop = postgres_database(args.postgres)
                try:
                    timed = asyncio.run(measure(url, count, home))
                finally:
                    if drop:
                        drop()
                per = 1000 / count
                rows.append(
                    f"| {count:,} | {backend} | {timed['first']:.2f} s | {timed['steady'] * 1000:.0f} ms "
                    f"({timed['steady'] * per * 1000:.0f} µs/agent) | {timed['fire']:.2f} s "
                    f"({timed['fire'] * per:.2f} ms/firing) |"
                )
                print(rows[-1], flush=True)
    body = (
        f'{note}. `python -m bench.triggers_tick`: N agents made from one template with `cron: "0 9 * * *"` '
        "and `idle: {after: 2h, run: compact}`; ticks called directly (no sleeping). First tick: records "
        "every trigger's first sighting; steady: median of 5 ticks with nothing due (the loop ticks at least "
        "every 30 s); 09:00: one message submitted to each agent's inbox (500 firings per inbox transaction).\n\n"
        "| agents | database | first tick | steady tick | 09:00 tick |\n| --- | --- | --- | --- | --- |\n"
        + "\n".join(rows)
    )
    write_section("triggers_tick", "Trigger ticks", body)


if __name__ == "__main__":
    main()
