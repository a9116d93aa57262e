"""Dequeue latency of the daemon, before and after a change, in one run: the idle path of bench.queue_compare
alone, on fresh processes, this tree against another checkout (`--base`, with its own virtual environment),
interleaved round by round.

A child process starts a daemon (poll 1 s, as in the queue comparison) over 10 agents, loads each once, then sends
`--jobs` no-op jobs one at a time to the idle daemon and waits for each. The latency of one job is measured from
the `submit` call (its commit included, as DBOS's enqueue is in the comparison) to the job's first line, and from
`submit`'s return (the commit) to the same point. Modes: `local` (submitted by the serving daemon's own process),
`notify` (Postgres: submitted by another daemon object on its own connections, which never starts: only the
notice wakes the server), `sqlite` (local, SQLite).

    python -m bench.dequeue_latency --base /path/to/main-checkout [--rounds 3] [--jobs 40] [--no-write]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from bench.common import ROOT, bench_argv, drop_postgres, machine_note, percentile, scratch_postgres, write_section

AGENTS = 10


async def child(url: str, mode: str, jobs: int) -> list[tuple[float, float]]:
    """(ms from the submit call, ms from its return) to the job's start, per job; this process's pagemind."""
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
    starts: list[float] = []

    @register_job("bench_mark")
    async def mark(agent):
        starts.append(time.perf_counter())
        return {"job": "bench_mark"}

    home = Path(tempfile.mkdtemp())
    (home / "agents").mkdir()
    (home / "agents" / "t.yaml").write_text(yaml.safe_dump({**spec_data("t"), "template": True}))
    settings = Settings.from_env({"PAGEMIND_HOME": str(home), "DATABASE_URL": url})
    daemon = Daemon(
        AgentCatalog(home / "agents", StateStore.open(url)),
        settings,
        model=FunctionModel(lambda request: reply_body("ok")),
        config=DaemonConfig(poll_s=1.0),
    )
    client = daemon
    if mode == "notify":
        client = Daemon(AgentCatalog(home / "agents", StateStore.open(url)), settings)
    names = [f"a{i}" for i in range(AGENTS)]
    for name in names:
        daemon.create_agent(name, template="t")
    await daemon.start()
    if daemon.wakeups is not None:
        await daemon.wakeups.listening.wait()
    for name in names:  # every agent loaded once, as in a long-running daemon
        await daemon.wait((await client.submit(name, "bench_mark", kind="job")).run_id, 30)
    out = []
    for i in range(jobs):
        await asyncio.sleep(0.02)  # the previous worker has given its agent back: an idle daemon
        before = len(starts)
        called = time.perf_counter()
        item = await client.submit(names[i % AGENTS], "bench_mark", kind="job")
        returned = time.perf_counter()
        done = await daemon.wait(item.run_id, 30)
        assert done.state == "done" and len(starts) == before + 1, done
        out.append(((starts[-1] - called) * 1000, (starts[-1] - returned) * 1000))
    await daemon.stop()
    return out


def run_child(python: str, mode: str, jobs: int) -> list[tuple[float, float]]:
    url = f"sqlite:///{tempfile.mkdtemp()}/dq.db" if mode == "sqlite" else scratch_postgres("dq")
    try:
        done = subprocess.run(
            bench_argv(python, "dequeue_latency", "--child", url, mode, str(jobs)),
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=600,
        )
    finally:
        if url.startswith("postgresql"):
            drop_postgres(url)
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    return [tuple(pair) for pair in json.loads(done.stdout.strip().splitlines()[-1])]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, help="a checkout to compare with (its .venv runs it)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--jobs", type=int, default=40)
    parser.add_argument("--modes", nargs="+", default=["local", "notify", "sqlite"])
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        url, mode, jobs = args.child
        print(json.dumps(asyncio.run(child(url, mode, int(jobs)))))
        return
    note = machine_note()
    variants = {"this tree": str(ROOT / ".venv" / "bin" / "python")}
    if args.base:
        variants = {"base": str(args.base / ".venv" / "bin" / "python"), **variants}
    samples: dict[tuple[str, str], list[tuple[float, float]]] = {}
    for n in range(args.rounds):
        order = list(variants) if n % 2 == 0 else list(reversed(variants))  # interleaved, alternating first
        for mode in args.modes:
            for variant in order:
                samples.setdefault((variant, mode), []).extend(run_child(variants[variant], mode, args.jobs))
                print(variant, mode, "done", flush=True)
    lines = [
        "| mode | tree | jobs | from the submit call p50 / p95 (ms) | from its commit p50 / p95 (ms) |",
        "| --- | --- | ---: | ---: | ---: |",
    ]
    for mode in args.modes:
        for variant in variants:
            got = samples[(variant, mode)]
            calls, commits = [c for c, _ in got], [r for _, r in got]
            lines.append(
                f"| {mode} | {variant} | {len(got)} | {statistics.median(calls):.1f} / "
                f"{percentile(calls, 95):.1f} | {statistics.median(commits):.1f} / "
                f"{percentile(commits, 95):.1f} |"
            )
    if args.base:
        lines.append("")
        for mode in args.modes:
            ratio = statistics.median(c for c, _ in samples[("this tree", mode)]) / statistics.median(
                c for c, _ in samples[("base", mode)]
            )
            lines.append(f"- {mode}: p50 from the submit call, this tree / base = {ratio:.2f}")
    body = (
        f"{note}; `python -m bench.dequeue_latency --rounds {args.rounds} --jobs {args.jobs}"
        f"{' --base <main>' if args.base else ''}`: {args.rounds} rounds, each mode and tree a fresh process "
        "and database, interleaved. Latency: a job's first line − the `submit` call (or its return).\n\n"
        + "\n".join(lines)
    )
    print(body)
    if not args.no_write:
        write_section("dequeue_latency", "Dequeue latency, idle daemon", body)


if __name__ == "__main__":
    main()
