"""The daemon's throughput and its own overhead, end to end over HTTP, on SQLite and on Postgres.

Three processes: a scripted OpenAI-compatible server with a fixed model latency (tests/support/openai_stub.py: two steps
a turn, a memory edit then the reply), `pagemind serve` over a folder holding one template, and this script as
the client. For each N it creates N agents from the template through the API, then sends every agent its
messages — one agent's messages one after another (a user waits for the reply), all agents at once up to
`--inflight` requests — and reports:

- turns/s and model steps/s (the stub counts the completions it served);
- the turn's latency as the client sees it, less the model's (steps × the stub's own time per completion, which
  its timers keep ~1 ms over `--latency-ms`): the daemon's own overhead,
  HTTP and queueing included, per turn and per step (p50, p95);
- the daemon process's CPU seconds per step (user + system, from /proc) and its RSS after the run with every
  agent loaded and idle, per agent over the RSS before the first message.

`--turns` is the turns of one measurement in all, at least one per agent: with `--turns 400`, 10 and 100 agents get
40 and 4 messages each, 1,000 and 10,000 agents one each. Its block of bench/RESULTS.md is rewritten after every
row, so a long run that is stopped keeps the rows it measured.

    python -m bench.daemon_throughput [--agents 10 100 1000 10000] [--db sqlite postgres] [--turns 400]
                                      [--section KEY]
"""

from __future__ import annotations

import argparse
import asyncio
import math
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
import httpx

from bench.common import ROOT, drop_postgres, machine_note, percentile, scratch_postgres, write_section

TEMPLATE = """
name: companion
template: true
model: {name: gpt-4o-mini, context_window: 8192, max_output_tokens: 256}
system: You are a warm companion. Keep what matters about the user in your human block.
blocks:
  - {label: persona, value: "I am warm and brief.", limit: 200}
  - {label: human, value: "", limit: 200}
"""
STEPS_PER_TURN = 2
TICK = os.sysconf("SC_CLK_TCK")


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def processes(pid: int) -> list[int]:
    """`pid` and its children: with `--workers` the daemon is the workers (the supervisor's CPU counts too)."""
    try:
        children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    except OSError:
        children = []
    return [pid, *map(int, children)]


def cpu_seconds(pid: int) -> float:
    total = 0.0
    for each in processes(pid):
        fields = Path(f"/proc/{each}/stat").read_text().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / TICK  # utime, stime
    return total


def machine_jiffies() -> tuple[int, int]:
    """(all, idle) CPU time of the whole machine so far, from /proc/stat."""
    fields = [int(value) for value in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    return sum(fields), fields[3] + fields[4]  # idle + iowait


def machine_busy(before: tuple[int, int], after: tuple[int, int]) -> float:
    """The fraction of every core's time spent busy between two `machine_jiffies` (daemon, stub, database, client)."""
    total, idle = after[0] - before[0], after[1] - before[1]
    return 1 - idle / total if total else 0.0


def rss_mb(pid: int) -> float:
    total = 0.0
    for each in processes(pid):
        for line in Path(f"/proc/{each}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                total += int(line.split()[1]) / 1024
    return total


def fresh_database(kind: str, home: Path) -> tuple[str, callable]:
    """A database URL and a function that drops it."""
    if kind == "sqlite":
        return f"sqlite:///{home / 'pagemind.db'}", lambda: None
    url = scratch_postgres("bench")
    return url, lambda: drop_postgres(url)


async def wait_healthy(url: str, process: subprocess.Popen, deadline_s: float = 120) -> None:
    end = time.monotonic() + deadline_s
    async with httpx.AsyncClient() as client:
        while time.monotonic() < end:
            if process.poll() is not None:
                raise RuntimeError(f"serve exited {process.returncode}: {process.stderr.read()}")
            try:
                if (await client.get(f"{url}/health", timeout=1)).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            await asyncio.sleep(0.1)
    raise RuntimeError("serve did not become healthy")


async def run_one(
    db: str,
    agents: int,
    turns: int,
    inflight: int,
    concurrency: int,
    stub: str,
    latency_ms: float,
    workers: int = 1,
    extra_env: dict[str, str] | None = None,
    settings: list[str] | None = None,
) -> dict[str, float]:
    """One measurement: a fresh database and daemon, `agents` agents, about `turns` turns in all."""
    home = Path(tempfile.mkdtemp(prefix="pagemind-bench-"))
    folder = home / "agents"
    folder.mkdir()
    (folder / "companion.yaml").write_text(TEMPLATE)
    database_url, drop = fresh_database(db, home)
    port = free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "QDRANT_", "PAGEMIND_"))}
    env.update(
        PAGEMIND_HOME=str(home),
        DATABASE_URL=database_url,
        OPENAI_BASE_URL=stub,
        OPENAI_API_KEY="bench",
        PAGEMIND_LOG_LEVEL="error",
        **(extra_env or {}),
    )
    serve = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "pagemind.scheduler.cli",
            "serve",
            str(folder),
            "--port",
            str(port),
            "--concurrency",
            str(concurrency),
            *(["--workers", str(workers)] if workers > 1 else []),
            *(part for setting in settings or [] for part in ("--set", setting)),
        ],
        cwd=ROOT,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        await wait_healthy(url, serve)
        # The client is aiohttp (one session, `inflight` connections): it costs the shared cores a fraction of what
        # httpx's pools did (1.1–1.4 ms of CPU per step on 16 pools, 7–13 ms on one), CPU taken from the daemon.
        connector = aiohttp.TCPConnector(limit=inflight, keepalive_timeout=60)
        async with aiohttp.ClientSession(
            base_url=url, connector=connector, timeout=aiohttp.ClientTimeout(total=600)
        ) as session:
            gate = asyncio.Semaphore(inflight)
            names = [f"user-{i:05d}" for i in range(agents)]

            retried = [0]  # requests sent again after a transport error (a connection the server closed)

            async def post(path: str, body: dict) -> tuple[int, dict]:
                """POST, sending it again after a transport error: creating an agent twice answers 409 (made by
                the first try), and a message carries an idempotency key, so a retry never doubles anything."""
                for attempt in range(5):
                    try:
                        async with session.post(path, json=body) as response:
                            return response.status, await response.json()
                    except aiohttp.ClientConnectionError as exc:
                        retried[0] += 1
                        print(f"retry {path}: {type(exc).__name__}", file=sys.stderr, flush=True)
                        if attempt == 4:
                            raise
                raise AssertionError("unreachable")

            async def create(name: str) -> None:
                async with gate:
                    status, answer = await post("/v1/agents", {"template": "companion", "name": name})
                    if status >= 400 and not (status == 409 and retried[0]):
                        raise RuntimeError(f"creating {name}: HTTP {status} {answer}")

            started = time.perf_counter()
            await asyncio.gather(*(create(n) for n in names))
            create_s = time.perf_counter() - started
            rss_before = rss_mb(serve.pid)
            per_agent = max(1, math.ceil(turns / agents))
            latencies: list[float] = []
            failures = 0

            async def converse(name: str) -> None:
                nonlocal failures
                for i in range(per_agent):
                    async with gate:
                        t0 = time.perf_counter()
                        status, answer = await post(
                            f"/v1/agents/{name}/messages",
                            {
                                "content": f"message {i} from {name}",
                                "timeout_s": 600,
                                "idempotency_key": f"bench-{name}-{i}",
                            },
                        )
                        elapsed = time.perf_counter() - t0
                    if status != 200 or answer["state"] != "done":
                        failures += 1
                    else:
                        latencies.append(elapsed * 1000)

            async def stub_stats() -> tuple[int, float]:
                """The stub's completions so far, and the seconds they took there in all."""
                async with session.get(f"{stub.rsplit('/v1', 1)[0]}/stats") as response:
                    stats = await response.json()
                return stats["completions"], stats["service_s"]

            steps_before, service_before = await stub_stats()
            cpu_before, machine_before = cpu_seconds(serve.pid), machine_jiffies()
            started = time.perf_counter()
            await asyncio.gather(*(converse(n) for n in names))
            wall = time.perf_counter() - started
            cpu = cpu_seconds(serve.pid) - cpu_before
            busy = machine_busy(machine_before, machine_jiffies())
            steps_after, service_after = await stub_stats()
            steps = steps_after - steps_before
            rss_after = rss_mb(serve.pid)
        # The model's latency is what the stub took per completion (its sleep overshoots `latency_ms` by its timers'
        # millisecond rounding, ~1 ms): not the daemon's time.
        step_model_ms = 1000 * (service_after - service_before) / max(1, steps)
        model_ms = STEPS_PER_TURN * step_model_ms
        overhead = [latency - model_ms for latency in latencies]
        return {
            "agents": agents,
            "turns": len(latencies),
            "failures": failures,
            "wall_s": wall,
            "turns_s": len(latencies) / wall,
            "steps_s": steps / wall,
            "create_s": create_s,
            "p50": percentile(overhead, 50),
            "p95": percentile(overhead, 95),
            "p50_step": percentile(overhead, 50) / STEPS_PER_TURN,
            "cpu_ms_step": 1000 * cpu / max(1, steps),
            "rss_mb": rss_after,
            "rss_kb_agent": 1024 * (rss_after - rss_before) / agents,
            "rss_before": rss_before,
            "load": os.getloadavg()[0],
            "retried": retried[0],
            "busy": busy,
            "model_ms": step_model_ms,
        }
    finally:
        serve.send_signal(signal.SIGTERM)
        try:
            serve.wait(120)
        except subprocess.TimeoutExpired:
            serve.kill()
        drop()


def table(rows: list[dict[str, float]]) -> str:
    head = (
        "| db | agents | turns | failed | turns/s | model steps/s | own overhead p50 / p95 per turn (ms) | "
        "per step p50 (ms) | daemon CPU per step (ms) | RSS (MB) | RSS per agent (KB) | creating N (s) | load | "
        "retried | machine busy | model ms per step |\n"
        "| --- |" + " ---: |" * 15 + "\n"
    )
    return head + "\n".join(
        f"| {r['db']} | {r['agents']:,} | {r['turns']:,} | {r['failures']} | {r['turns_s']:.1f} | {r['steps_s']:.1f} | "
        f"{r['p50']:.1f} / {r['p95']:.1f} | {r['p50_step']:.1f} | {r['cpu_ms_step']:.2f} | {r['rss_mb']:.0f} | "
        f"{r['rss_kb_agent']:.0f} | {r['create_s']:.1f} | {r['load']:.2f} | {r.get('retried', 0)} | "
        f"{r['busy']:.0%} | {r['model_ms']:.2f} |"
        for r in rows
    )


def targets(rows: list[dict[str, float]]) -> str:
    """The issue's targets against the measured rows (Postgres; SQLite where no Postgres row was measured)."""
    pg = [r for r in rows if r["db"] == "postgres"] or rows
    best = max(pg, key=lambda r: r["steps_s"])
    largest = max(pg, key=lambda r: r["agents"])
    overhead = min(r["p50_step"] for r in pg)

    def verdict(ok: bool) -> str:
        return "met" if ok else "**not met**"

    return (
        f"Targets ({best['db']}): ≥ 500 model steps/s — best {best['steps_s']:.1f} at {best['agents']:,} agents, "
        f"{verdict(best['steps_s'] >= 500)}; own overhead ≤ 5 ms p50 per step — best {overhead:.1f} ms, "
        f"{verdict(overhead <= 5)}; RSS ≤ 0.5 MB per idle agent — {largest['rss_kb_agent'] / 1024:.2f} MB at "
        f"{largest['agents']:,} agents, {verdict(largest['rss_kb_agent'] <= 512)}."
    )


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, nargs="+", default=[10, 100, 1000])
    parser.add_argument("--db", nargs="+", choices=["sqlite", "postgres"], default=["sqlite", "postgres"])
    parser.add_argument("--turns", type=int, default=400, help="turns in all per measurement (at least one each)")
    parser.add_argument("--inflight", type=int, default=64, help="client requests in flight at once")
    parser.add_argument("--concurrency", type=int, default=64, help="the daemon's --concurrency")
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--workers", type=int, default=1, help="`pagemind serve --workers` (Postgres rows only)")
    parser.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="set in the daemon's environment (repeatable), e.g. PAGEMIND_HTTP_CLIENT=httpx",
    )
    parser.add_argument(
        "--set",
        dest="settings",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a daemon setting for `pagemind serve --set` (repeatable), e.g. hold_steps=false",
    )
    parser.add_argument("--no-write", action="store_true", help="print only; leave bench/RESULTS.md alone")
    parser.add_argument(
        "--section",
        help="the key of the bench/RESULTS.md block to write (`<!-- bench:KEY -->`; default daemon_throughput, or "
        "daemon_throughput.low_load with --inflight 1)",
    )
    args = parser.parse_args()
    low_load = args.inflight == 1
    key = args.section or ("daemon_throughput.low_load" if low_load else "daemon_throughput")
    title = "Daemon own overhead at low load" if low_load else "Daemon throughput"
    title = f"{title} ({args.section})" if args.section else title
    note = machine_note()
    stub = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "support" / "openai_stub.py"), "--latency-ms", str(args.latency_ms)],
        stdout=subprocess.PIPE,
        text=True,
    )
    port = int(stub.stdout.readline().split()[-1])
    rows = []

    def body() -> str:
        return (
            f"{note}. `python -m bench.daemon_throughput --agents {' '.join(map(str, args.agents))} --turns "
            f"{args.turns} --inflight {args.inflight} --concurrency {args.concurrency}`: a stub model with "
            f"{args.latency_ms:.0f} ms latency, {STEPS_PER_TURN} steps a turn (memory edit, reply); client, "
            "daemon and stub share the machine's CPUs. Turns: at least one message per agent (one each at "
            f"{args.turns:,} agents and more). Own overhead = the client's turn latency − steps × model latency, "
            "the stub's own time per completion (model ms per step: its timers keep it ~1 ms over the set "
            "latency); what is left is HTTP, queueing for the daemon's concurrency and the runtime's work. "
            "Machine busy: every core's busy share over the run (daemon, stub, database, client). RSS per agent "
            "= (RSS after the run − RSS before the first message) / agents; the daemon keeps at most "
            "`max_loaded` (1,024) agents loaded, so above that the rest cost only their rows. Retried: requests "
            "sent again after a transport error (agents: 409 then means made; messages carry an idempotency "
            "key).\n\n" + table(rows) + "\n\n" + targets(rows)
        )

    try:
        for db in args.db:
            for n in args.agents:
                row = await run_one(
                    db,
                    n,
                    args.turns,
                    args.inflight,
                    args.concurrency,
                    f"http://127.0.0.1:{port}/v1",
                    args.latency_ms,
                    args.workers if db == "postgres" else 1,
                    dict(item.split("=", 1) for item in args.env),
                    args.settings,
                )
                rows.append({"db": db, **row})
                print(table(rows[-1:]).splitlines()[-1], flush=True)
                if not args.no_write:
                    write_section(key, title, body())
    finally:
        stub.terminate()
    print(body())


if __name__ == "__main__":
    asyncio.run(main())
