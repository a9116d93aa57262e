"""Which queue for the daemon's inbox: ours (an `inbox` table, agent leases, SKIP LOCKED, LISTEN/NOTIFY or
in-process wake-ups) on SQLite and Postgres, against DBOS 3.x (partitioned queue, one partition per agent, partition
concurrency 1) when it is installed (`pip install dbos`; not a pagemind dependency).

The workload of issue 12: 10 agents x 10 messages, a 50 ms job, strict per-agent order.
- burst: all 100 enqueued at once; turns/s from the first enqueue to the last end, and the start latency
  (job start - enqueue) p50/p95, which includes waiting behind the agent's earlier jobs (the floor: 10 x 50 ms
  per agent, 200 jobs/s at most);
- idle: 20 jobs sent one at a time to an idle queue, each awaited; the dequeue latency (the job's first line − the
  enqueue call, whose commit it includes) p50/p95: the wake-up path alone;
- order: whether every agent's jobs started in enqueue order and never overlapped.
Ours also runs the burst with real agent turns (a 50 ms model, one step) and, on Postgres, the idle case with the
jobs submitted by another process's client (woken by LISTEN/NOTIFY only).

    python -m bench.queue_compare [--skip-dbos]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import tempfile
import time
from itertools import pairwise
from pathlib import Path

from bench.common import (
    ROOT,
    bench_argv,
    machine_note,
    median,
    percentile,
    read_section,
    scratch_postgres,
    write_section,
)

AGENTS, PER_AGENT, JOB_S, IDLE_JOBS = 10, 10, 0.05, 20


def summary(name: str, spans: list[tuple[str, int, float, float, float]], wall: float, idle: list[float]) -> dict:
    """spans: (agent, seq, enqueued, started, ended) per job of the burst; idle: dequeue latencies."""
    ordered = True
    for agent in {s[0] for s in spans}:
        mine = sorted((s for s in spans if s[0] == agent), key=lambda s: s[3])
        ordered &= [s[1] for s in mine] == sorted(s[1] for s in mine)
        ordered &= all(a[4] <= b[3] + 1e-6 for a, b in pairwise(mine))
    starts = [(s[3] - s[2]) * 1000 for s in spans]
    return {
        "name": name,
        "jobs_per_s": len(spans) / wall,
        "start_p50_ms": median(starts),
        "start_p95_ms": percentile(starts, 95),
        "idle_p50_ms": median(idle) if idle else None,
        "idle_p95_ms": percentile(idle, 95) if idle else None,
        "ordered": ordered,
    }


# -- ours --------------------------------------------------------------------------------------------------------


async def ours(url: str, name: str, turns: bool = False, remote_client: bool = False) -> dict:
    import yaml

    from pagemind.runtime.process.logs import configure_logging
    from pagemind.runtime.process.settings import Settings
    from pagemind.runtime.state.store import StateStore
    from pagemind.runtime.testing.models import FunctionModel
    from pagemind.runtime.testing.responses import reply_body
    from pagemind.runtime.testing.specs import spec_data
    from pagemind.scheduler.catalog import AgentCatalog
    from pagemind.scheduler.daemon import Daemon
    from pagemind.scheduler.daemon_config import DaemonConfig
    from pagemind.scheduler.jobs import register_job

    configure_logging("WARNING")

    starts: list[float] = []  # when each job (or each model call) began, as DBOS's job records its start

    @register_job("sleep50")
    async def sleep50(agent):
        starts.append(time.time())
        await asyncio.sleep(JOB_S)
        return {"job": "sleep50"}

    async def model_step(request):
        starts.append(time.time())
        await asyncio.sleep(JOB_S)
        return reply_body("ok")

    home = Path(tempfile.mkdtemp())
    (home / "agents").mkdir()
    (home / "agents" / "t.yaml").write_text(yaml.safe_dump({**spec_data("t"), "template": True}))
    settings = Settings.from_env({"PAGEMIND_HOME": str(home), "DATABASE_URL": url})
    catalog = AgentCatalog(home / "agents", StateStore.open(settings.database_url))
    daemon = Daemon(catalog, settings, model=FunctionModel(model_step), config=DaemonConfig(poll_s=1.0))
    client = daemon
    if remote_client:  # another process's API: its submissions reach the daemon by NOTIFY only
        client = Daemon(AgentCatalog(home / "agents", StateStore.open(settings.database_url)), settings)
    names = [f"a{i}" for i in range(AGENTS)]
    for agent in names:
        daemon.create_agent(agent, template="t")
    kind, content = ("message", "hello") if turns else ("job", "sleep50")
    await daemon.start()
    if daemon.wakeups is not None:
        await daemon.wakeups.listening.wait()
    for agent in names:  # load every agent once, as a long-running daemon has
        await daemon.wait((await client.submit(agent, content, kind=kind)).run_id, 30)
    started = time.perf_counter()
    items = [await client.submit(names[i % AGENTS], content, kind=kind) for i in range(AGENTS * PER_AGENT)]
    done = [await daemon.wait(item.run_id, 120) for item in items]
    wall = time.perf_counter() - started
    idle = []
    for i in range(IDLE_JOBS):
        await asyncio.sleep(0.02)  # the last worker has given its agent back: the daemon is idle
        before, enqueued = len(starts), time.time()
        item = await client.submit(names[i % AGENTS], content, kind=kind)
        await daemon.wait(item.run_id, 30)
        idle.append((starts[before] - enqueued) * 1000)  # to the job's (the turn's first model call's) start
    await daemon.stop()
    seq = {item.run_id: n for n, item in enumerate(items)}
    burst = [
        (d.agent_name, seq[d.run_id], d.created_at.timestamp(), d.started_at.timestamp(), d.finished_at.timestamp())
        for d in done
    ]
    assert all(d.state == "done" for d in done), [d.error for d in done if d.state != "done"][:3]
    return summary(name, burst, wall, idle)


# -- DBOS (in a process of its own: DBOS is process-global) ------------------------------------------------------


def dbos_child(url: str, poll_s: float) -> None:
    """Run the workload on DBOS and print the summary as JSON."""
    from dbos import DBOS, SetEnqueueOptions

    spans: dict[tuple[str, int], tuple[float, float, float]] = {}
    DBOS(
        config={
            "name": "queue-compare",
            "system_database_url": url,
            "run_admin_server": False,
            "notification_listener_polling_interval_sec": poll_s,
        }
    )

    @DBOS.workflow()
    async def job(agent: str, seq: int, enqueued: float) -> None:
        start = time.time()
        await asyncio.sleep(JOB_S)
        spans[(agent, seq)] = (enqueued, start, time.time())

    DBOS.launch()
    queue = DBOS.register_queue("agents", partition_concurrency=1, polling_interval_sec=poll_s)

    async def run() -> dict:
        async def enqueue(agent: str, seq: int):
            with SetEnqueueOptions(queue_partition_key=agent):
                return await queue.enqueue_async(job, agent, seq, time.time())

        started = time.perf_counter()
        handles = [await enqueue(f"a{i % AGENTS}", i) for i in range(AGENTS * PER_AGENT)]
        for handle in handles:
            await handle.get_result()
        wall = time.perf_counter() - started
        burst = [(agent, seq, *times) for (agent, seq), times in spans.items()]
        idle = []
        for i in range(IDLE_JOBS):
            handle = await enqueue(f"a{i % AGENTS}", 1000 + i)
            await handle.get_result()
            enqueued, start, _ = spans[(f"a{i % AGENTS}", 1000 + i)]
            idle.append((start - enqueued) * 1000)
        backend = "Postgres" if url.startswith("postgresql") else "SQLite"
        return summary(f"DBOS 3.4, {backend}, poll {poll_s * 1000:g} ms", burst, wall, idle)

    print(json.dumps(asyncio.run(run())))
    DBOS.destroy()


def dbos(url: str, poll_s: float) -> dict | None:
    command = bench_argv(sys.executable, "queue_compare", "--dbos-child", url, str(poll_s))
    done = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=600)
    if done.returncode != 0:
        print(done.stderr[-2000:], file=sys.stderr)
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])


def row(r: dict) -> str:
    idle = f"{r['idle_p50_ms']:.1f} / {r['idle_p95_ms']:.1f}" if r["idle_p50_ms"] is not None else "–"
    return (
        f"| {r['name']} | {r['jobs_per_s']:.1f} | {r['start_p50_ms']:.0f} / {r['start_p95_ms']:.0f} | {idle} | "
        f"{'yes' if r['ordered'] else '**no**'} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--skip-dbos", action="store_true")
    parser.add_argument("--dbos-child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.dbos_child:
        dbos_child(args.dbos_child[0], float(args.dbos_child[1]))
        return
    note = machine_note()
    tmp = Path(tempfile.mkdtemp())
    results = [
        asyncio.run(ours(f"sqlite:///{tmp / 'ours.db'}", "ours, SQLite")),
        asyncio.run(ours(scratch_postgres("qc"), "ours, Postgres")),
        asyncio.run(
            ours(scratch_postgres("qc"), "ours, Postgres, submitted by another client (NOTIFY)", remote_client=True)
        ),
        asyncio.run(ours(f"sqlite:///{tmp / 'turns.db'}", "ours, SQLite, real turns (50 ms model)", turns=True)),
        asyncio.run(ours(scratch_postgres("qc"), "ours, Postgres, real turns (50 ms model)", turns=True)),
    ]
    try:
        import dbos as _  # noqa: F401

        have_dbos = not args.skip_dbos
    except ImportError:
        have_dbos = False
    kept: list[str] = []
    if have_dbos:
        for url, poll in (
            (scratch_postgres("qc"), 0.05),
            (scratch_postgres("qc"), 0.01),
            (f"sqlite:///{tmp / 'dbos.db'}", 0.05),
        ):
            result = dbos(url.replace("postgresql+psycopg://", "postgresql://"), poll)
            if result:
                results.append(result)
    else:  # the DBOS rows of the last run that had it stay, marked as such
        kept = [
            line if line.endswith("(not re-run) |") else line[:-1] + "(not re-run) |"
            for line in read_section("queue_compare").splitlines()
            if line.startswith("| DBOS")
        ]
    lines = [
        "| queue | jobs/s (burst) | start latency p50 / p95, ms (burst) | dequeue latency p50 / p95, ms (idle) "
        "| per-agent order |",
        "| --- | --- | --- | --- | --- |",
        *map(row, results),
        *kept,
    ]
    body = (
        f"{AGENTS} agents x {PER_AGENT} jobs of {JOB_S * 1000:g} ms, strict per-agent order (the floor: "
        f"{AGENTS / JOB_S:.0f} jobs/s); idle: {IDLE_JOBS} jobs one at a time. `python -m bench.queue_compare`; "
        f"{note}.\n\n" + "\n".join(lines)
    )
    body += (
        "\n\nIdle dequeue latency: from the `submit`/`enqueue` call (its commit included) to the job's first line "
        "(for real turns: the first model call), for ours and DBOS alike."
    )
    if not have_dbos:
        body += (
            " DBOS was not installed in this run (`pip install dbos` to compare): its rows are those of the "
            "last run that had it, on a machine as loaded as that run's note says."
        )
    print(body)
    write_section("queue_compare", "Queue comparison (daemon inbox)", body)


if __name__ == "__main__":
    main()
