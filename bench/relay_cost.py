"""What relaying a run's events to another daemon process costs (issue 12, scale-out streaming), on Postgres.

One process holds two daemons on one fresh Postgres schema: Y runs every turn (an instant ledger model: two steps
a turn, a memory edit then `send_message`), X takes no work and streams. Each round runs `--agents` agents ×
`--turns` messages (all submitted at once, per-agent order) in one of three ways, the ways interleaved:

- `none`: submitted to Y, nobody streams (the daemon as before this change);
- `local`: submitted to Y and streamed from Y (`Daemon.events`): the single-daemon streaming path, which now
  costs one watch (`UPDATE inbox … RETURNING`) per stream;
- `remote`: submitted to X and streamed from X while Y runs them: the relay (Y writes `run_events` batches with a
  NOTIFY; X reads them on each notice).

Per model step: this process's CPU (both daemons, their database clients, the streams), the Postgres server's
CPU (every `postgres` process on the machine, from /proc: other users of the server count too), the relay's
statements (writes, reads, watches) and the bytes written, with the model bodies left out as relayed and, for
comparison, as whole trace lines. Writes its block of bench/RESULTS.md unless --no-write.

    python -m bench.relay_cost [--agents 20] [--turns 5] [--rounds 3] [--no-write]
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
from pydantic_core import to_json

from bench.common import machine_note, median, write_section
from pagemind.runtime.process.logs import configure_logging
from pagemind.runtime.process.settings import Settings
from pagemind.runtime.state.store import StateStore
from pagemind.scheduler.catalog import AgentCatalog
from pagemind.scheduler.daemon import Daemon
from pagemind.scheduler.daemon_config import DaemonConfig
from pagemind.scheduler.queue.inbox import Inbox
from pagemind.scheduler.streams import relay as relay_module
from tests.support.daemon_support import ledger_model, write_agents

POSTGRES = os.environ.get("PAGEMIND_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
STEPS_PER_TURN = 2
TICK = os.sysconf("SC_CLK_TCK")
MODES = ("none", "local", "remote")
HEADER = (
    "| mode | ms CPU/step | vs none | server ms CPU/step | vs none | writes / reads / watches per step | "
    "ms in writes / reads per step | bytes/step (whole) | rounds (ms CPU/step) |\n"
    "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"
)


class Counters:
    """Relay statements and bytes, counted by wrapping the relay's and the inbox's methods."""

    def __init__(self) -> None:
        self.writes = self.reads = self.watches = self.bytes = self.whole_bytes = 0
        self.write_s = self.read_s = 0.0  # wall time inside the relay's writes (Y) and reads (X)
        store, inbox = relay_module.RelayStore, Inbox
        write, read, watch, line = store.write, store.read, inbox.watch, relay_module.relayed_line
        counters = self

        def counted_write(self, run_id, batch, now):
            counters.writes += 1
            counters.bytes += sum(len(text) for _, text in batch)
            started = time.perf_counter()
            try:
                return write(self, run_id, batch, now)
            finally:
                counters.write_s += time.perf_counter() - started

        def counted_read(self, run_id, after):
            counters.reads += 1
            started = time.perf_counter()
            try:
                return read(self, run_id, after)
            finally:
                counters.read_s += time.perf_counter() - started

        def counted_watch(self, run_id, watcher):
            counters.watches += 1
            return watch(self, run_id, watcher)

        def measured_line(event):
            counters.whole_bytes += len(to_json(event))
            return line(event)

        store.write, store.read, inbox.watch = counted_write, counted_read, counted_watch
        relay_module.relayed_line = measured_line
        import pagemind.scheduler.streams.fanout as fanout_module

        fanout_module.relayed_line = measured_line

    def snapshot(self) -> tuple[float, ...]:
        return self.writes, self.reads, self.watches, self.bytes, self.whole_bytes, self.write_s, self.read_s


def postgres_cpu() -> dict[str, int]:
    """CPU ticks of every postgres process on this machine (the server's work for every client), by pid."""
    ticks = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)
            if "postgres" in fields[0]:
                parts = fields[1].split()
                ticks[pid] = int(parts[11]) + int(parts[12])
        except (OSError, IndexError, ValueError):
            continue
    return ticks


def postgres_cpu_since(before: dict[str, int]) -> float:
    """CPU seconds the postgres processes spent since `before` (a process that ended meanwhile is left out; one
    that started counts whole)."""
    now = postgres_cpu()
    return sum(ticks - before.get(pid, 0) for pid, ticks in now.items()) / TICK


def make_daemon(url: str, folder: Path, home: Path) -> Daemon:
    settings = Settings.from_env({"PAGEMIND_HOME": str(home), "DATABASE_URL": url})
    return Daemon(
        AgentCatalog(folder, StateStore.open(url)), settings, model=ledger_model(), config=DaemonConfig(poll_s=1.0)
    )


async def one_round(
    mode: str, x: Daemon, y: Daemon, names: list[str], turns: int, counters: Counters, tag: str
) -> dict[str, float]:
    """Run `turns` messages per agent in `mode`; the costs per step."""
    front = x if mode == "remote" else y
    before, cpu, server, wall = counters.snapshot(), time.process_time(), postgres_cpu(), time.monotonic()
    streams = []
    items = []
    for n in range(turns):
        for name in names:
            item = await front.submit(name, f"msg {tag}{n}")
            items.append(item)
            if mode != "none":
                streams.append(front.events(item.run_id))

    async def drain(stream) -> int:
        return sum([1 async for _ in stream])

    seen = await asyncio.gather(*(drain(s) for s in streams))
    for item in items:
        done = await front.wait(item.run_id, 120)
        assert done.state == "done", done
    steps = len(items) * STEPS_PER_TURN
    if mode != "none":
        assert all(count == 12 for count in seen), seen[:5]
    after = counters.snapshot()
    delta = [b - a for a, b in zip(before, after, strict=True)]
    return {
        "cpu_ms": (time.process_time() - cpu) * 1000 / steps,
        "server_ms": postgres_cpu_since(server) * 1000 / steps,
        "wall_ms": (time.monotonic() - wall) * 1000 / steps,
        "writes": delta[0] / steps,
        "reads": delta[1] / steps,
        "watches": delta[2] / steps,
        "bytes": delta[3] / steps,
        "whole_bytes": delta[4] / steps,
        "write_ms": delta[5] * 1000 / steps,
        "read_ms": delta[6] * 1000 / steps,
    }


async def measure(url: str, agents: int, turns: int, rounds: int, home: Path) -> dict[str, list[dict[str, float]]]:
    counters = Counters()
    folder = write_agents(home / "agents", ())
    y, x = make_daemon(url, folder, home), make_daemon(url, folder, home)
    names = [f"u{i}" for i in range(agents)]
    for name in names:
        y.create_agent(name, template="companion")
    x.dispatcher.stopping = True  # X takes no work: it only streams
    await y.start()
    await x.start()
    await x.wakeups.listening.wait()
    await y.wakeups.listening.wait()
    results: dict[str, list[dict[str, float]]] = {mode: [] for mode in MODES}
    try:
        await one_round("none", x, y, names, 1, counters, "warm")  # load every agent
        await one_round("remote", x, y, names, 1, counters, "warm2")
        for r in range(rounds):
            for mode in MODES:
                results[mode].append(await one_round(mode, x, y, names, turns, counters, f"{mode}{r}-"))
                print(mode, {k: round(v, 3) for k, v in results[mode][-1].items()}, flush=True)
    finally:
        await x.stop()
        await y.stop()
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--agents", type=int, default=20)
    parser.add_argument("--turns", type=int, default=5)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    configure_logging("ERROR")
    note = machine_note()
    admin = sqlalchemy.create_engine(POSTGRES)
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    with admin.begin() as conn:
        conn.execute(sqlalchemy.text(f"CREATE SCHEMA {schema}"))
    try:
        with tempfile.TemporaryDirectory() as tmp:
            os.environ["PAGEMIND_HOME"] = tmp
            results = asyncio.run(
                measure(f"{POSTGRES}?options=-csearch_path%3D{schema}", args.agents, args.turns, args.rounds, Path(tmp))
            )
    finally:
        with admin.begin() as conn:
            conn.execute(sqlalchemy.text(f"DROP SCHEMA {schema} CASCADE"))
        admin.dispose()
    keys = (
        "cpu_ms",
        "server_ms",
        "wall_ms",
        "writes",
        "reads",
        "watches",
        "bytes",
        "whole_bytes",
        "write_ms",
        "read_ms",
    )
    med = {mode: {k: median([r[k] for r in results[mode]]) for k in keys} for mode in MODES}
    base = med["none"]
    rows = []
    for mode in MODES:
        m = med[mode]
        rows.append(
            f"| {mode} | {m['cpu_ms']:.2f} | {m['cpu_ms'] - base['cpu_ms']:+.2f} | {m['server_ms']:.2f} | "
            f"{m['server_ms'] - base['server_ms']:+.2f} | {m['writes']:.2f} / {m['reads']:.2f} / "
            f"{m['watches']:.2f} | {m['write_ms']:.2f} / {m['read_ms']:.2f} | "
            f"{m['bytes']:.0f} ({m['whole_bytes']:.0f}) | "
            f"{', '.join(format(r['cpu_ms'], '.2f') for r in results[mode])} |"
        )
        print(rows[-1])
    if args.no_write:
        return
    write_section(
        "relay_cost",
        "Event relay between daemon processes",
        f"""
{note}; Postgres, one process, daemons X (streams only) and Y (runs every turn); {args.agents} agents ×
{args.turns} messages a round, submitted at once, ledger model (instant; 2 steps, 12 events a turn), {args.rounds}
rounds per mode, modes interleaved; medians. CPU per model step: this process (both daemons and the streams), and
every postgres process on the machine. Relay statements per step: writes / reads / watches. Bytes written per
step as relayed (model bodies left out), and as whole trace lines in brackets. Wall ms per step inside the relay's
writes (in Y, the daemon running the turn) and reads (in X, the streaming daemon).

{HEADER}
{chr(10).join(rows)}
""",
    )


if __name__ == "__main__":
    main()
