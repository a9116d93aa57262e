"""An agent's inbox statements per turn on Postgres, as the inbox's history grows (issue 12): wall and CPU time of a
turn's inbox work — its submission and claim (or, in a checkout with `hand_off`, the one claimed submission a
lingering worker gets) and its finish —
with 1,000 and 100,000 finished items already stored, this tree against another checkout (`--base`, its own
virtual environment), interleaved in fresh processes on fresh databases. Each statement runs well past psycopg's
prepare threshold, so Postgres plans it as the daemon's long-lived connections do.

    python -m bench.inbox_statements --base /path/to/main-checkout [--rounds 3] [--history 1000 100000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import resource
import statistics
import subprocess
import time
from pathlib import Path

from bench.common import (
    ROOT,
    alternating,
    bench_argv,
    checkout_pythons,
    drop_postgres,
    machine_note,
    scratch_postgres,
    write_section,
)

AGENTS = 100
TURNS = 400  # measured after 40 to warm up (prepared statements, caches)


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


async def child(url: str, history: int) -> dict[str, dict[str, float]]:
    """Time a turn's inbox statements with this process's pagemind; per path, p50 wall ms and mean CPU ms."""
    import inspect

    import sqlalchemy as sa

    from pagemind.runtime.process.logs import configure_logging
    from pagemind.runtime.state.records import utcnow
    from pagemind.runtime.state.store import StateStore
    from pagemind.scheduler.queue.inbox import Inbox

    configure_logging("WARNING")
    store = StateStore.open(url)
    inbox = Inbox(store.engine)
    with store.engine.begin() as conn:
        conn.execute(
            sa.text(
                "INSERT INTO agents (id, name, spec_hash, spec_json, summary, pressure_warned, token_correction, "
                "created_at, updated_at) SELECT g, 'user-' || g, '', '{}', '', false, 1.0, now(), now() "
                "FROM generate_series(1, :n) g"
            ),
            {"n": AGENTS},
        )
        conn.execute(
            sa.text(
                "INSERT INTO inbox (run_id, agent_id, kind, content, state, attempts, created_at, finished_at) "
                "SELECT md5(g::text), 1 + g % :n, 'message', 'an earlier message', 'done', 1, now(), now() "
                "FROM generate_series(1, :h) g"
            ),
            {"n": AGENTS, "h": history},
        )
        conn.execute(sa.text("ANALYZE inbox"))
    paths = ["submit, claim, finish"]
    placement = inspect.signature(inbox.submit).parameters
    if "claim_for" in placement or "hand_off" in placement:  # de509e1 named it `claim_for`
        paths.append("claimed submission, finish")
    timings: dict[str, tuple[list[float], list[float]]] = {path: ([], []) for path in paths}
    for turn in range(TURNS):
        for path in paths:
            agent = 1 + turn % AGENTS
            now = utcnow()
            wall, cpu = time.perf_counter(), _cpu()
            if path == "submit, claim, finish":
                await inbox.submit(agent, f"user-{agent}", "message", "hello", None, now, "bench")
                item = await inbox.claim_next(agent, "bench", now, now)
            elif "hand_off" in placement:
                from pagemind.scheduler.queue.inbox import HandOff

                hand_off = HandOff("bench", now, store, None)
                item, _ = await inbox.submit(agent, f"user-{agent}", "message", "hello", None, now, hand_off=hand_off)
            else:
                item, _ = await inbox.submit(
                    agent, f"user-{agent}", "message", "hello", None, now, claim_for=("bench", now)
                )
            await inbox.finish(item, "bench", now, result={"reply": "hi"})
            if turn >= 40:
                timings[path][0].append((time.perf_counter() - wall) * 1000)
                timings[path][1].append((_cpu() - cpu) * 1000)
    store.engine.dispose()
    return {path: {"wall_ms": statistics.median(w), "cpu_ms": statistics.mean(c)} for path, (w, c) in timings.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, required=False)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--history", type=int, nargs="+", default=[1000, 100000])
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(child(args.child[0], int(args.child[1])))))
        return
    note = machine_note()
    variants = checkout_pythons(args.base)
    got: dict[tuple[int, str, str], list[dict[str, float]]] = {}
    for n in range(args.rounds):
        for history in args.history:
            for variant in alternating(list(variants), n):
                url = scratch_postgres("inbox")
                try:
                    done = subprocess.run(
                        bench_argv(variants[variant], "inbox_statements", "--child", url, str(history)),
                        cwd=ROOT,
                        capture_output=True,
                        text=True,
                        timeout=900,
                        check=True,
                    )
                finally:
                    drop_postgres(url)
                for path, row in json.loads(done.stdout.strip().splitlines()[-1]).items():
                    got.setdefault((history, variant, path), []).append(row)
    lines = [
        "| finished items stored | tree | a turn's inbox statements | wall ms p50 (median of runs) | "
        "CPU ms (median of runs) | runs (wall) |",
        "| ---: | --- | --- | ---: | ---: | --- |",
    ]
    for (history, variant, path), runs in got.items():
        walls = ", ".join(f"{r['wall_ms']:.2f}" for r in runs)
        lines.append(
            f"| {history:,} | {variant} | {path} | {statistics.median(r['wall_ms'] for r in runs):.2f} | "
            f"{statistics.median(r['cpu_ms'] for r in runs):.2f} | {walls} |"
        )
    body = (
        f"{note}; `python -m bench.inbox_statements --rounds {args.rounds} --history "
        f"{' '.join(map(str, args.history))}{' --base <main>' if args.base else ''}`: a turn's inbox statements "
        f"on Postgres for {AGENTS} agents in turn, {TURNS - 40} turns measured per path after 40, with that many "
        "finished items stored before; each tree a fresh process on a fresh database, interleaved.\n\n"
        + "\n".join(lines)
    )
    print(body)
    if not args.no_write:
        write_section("inbox_statements", "Inbox statements as the history grows", body)


if __name__ == "__main__":
    main()
