"""A/B of the runtime's own cost per step: this tree against another, interleaved in one run (issue 11).

Each round runs `bench.step_overhead`'s agent (companion, in-process instant model, SQLite, 20 messages in
the window) at 1,000 stored messages in a fresh process per tree, alternating trees, and records the median
wall time and CPU time (`time.process_time`) per step. The other tree comes as a folder holding
`pagemind/{runtime,tools,blocks,scheduler}` (links to that tree's folders), put first on PYTHONPATH. Reports the
ratio of the medians over rounds (this tree / other); CPU is the steadier figure on a shared machine.
With --http, each round runs `bench.step_overhead_http`'s rotation for one configuration (1,000 stored, window
51, the model a local server in another process) and reports its own cost (wall minus the bare round trip) and
CPU per step.

    python -m bench.step_cost_ab --other /tmp/basepkg --label "main 292d79a" [--rounds 5] [--turns 300] [--http]

Writes its block of bench/RESULTS.md (one per mode) unless --no-write.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import ROOT, bench_argv, machine_note, median, table_row, write_section

HISTORY = 1_000


async def _worker(turns: int, home: Path) -> dict[str, float]:
    from bench.step_overhead import IN_CONTEXT, seed_history
    from pagemind.runtime.agent import Agent
    from pagemind.runtime.spec.loading import load_spec
    from pagemind.runtime.state.engine import make_engine
    from pagemind.runtime.state.store import StateStore
    from pagemind.runtime.testing.models import FunctionModel
    from pagemind.runtime.testing.responses import tool_call_body

    store = StateStore(make_engine(f"sqlite:///{home / 'ab.db'}"))
    model = FunctionModel(lambda request: tool_call_body("send_message", {"message": "ok"}))
    agent = await Agent.load(load_spec("agents/companion.yaml"), model=model, store=store)
    seed_history(store, agent.record.id, HISTORY)
    agent = await Agent.load(agent.spec, model=model, store=store)
    walls, cpus = [], []
    for i in range(turns):
        wall, cpu = time.perf_counter(), time.process_time()
        await agent.send(f"turn {i}")
        walls.append((time.perf_counter() - wall) * 1000)
        cpus.append((time.process_time() - cpu) * 1000)
        agent.window.messages = agent.window.messages[-IN_CONTEXT:]
    return {"wall": median(walls[20:]), "cpu": median(cpus[20:])}


def _http_worker(turns: int, home: Path, every: bool = False) -> dict[str, float]:
    """One process's HTTP rotation: own cost and CPU at 1,000 stored / window 51, or with `every`, at each of
    `bench.step_overhead_http`'s configurations (keys `own 10/9`, `cpu 10/9`, …)."""
    from bench import step_overhead_http as http

    server = subprocess.Popen(
        bench_argv(sys.executable, "step_overhead_http", "--serve"), cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        url = f"http://127.0.0.1:{server.stdout.readline().strip()}/v1"
        os.environ.update(PAGEMIND_HOME=str(home), OPENAI_BASE_URL=url)
        os.environ.pop("DATABASE_URL", None)
        rows = asyncio.run(http.measure(turns, url, home, configs=http.CONFIGS if every else ((HISTORY, 51),)))
    finally:
        server.kill()
        server.wait()
    if every:
        return {
            f"{key} {r['stored']}/{w}": r[key]
            for r, (_, w) in zip(rows, http.CONFIGS, strict=True)
            for key in ("own", "cpu", "own_cpu")
        }
    return {"wall": rows[0]["own"], "cpu": rows[0]["cpu"]}


def _run(pythonpath: str | None, turns: int, http: bool, every: bool = False) -> dict[str, float]:
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath + os.pathsep + env.get("PYTHONPATH", "")
    flags = [*(["--http"] if http else []), *(["--every"] if every else [])]
    out = subprocess.run(
        bench_argv(sys.executable, "step_cost_ab", "--worker", "--turns", str(turns), *flags),
        env=env,
        cwd=ROOT,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--other", help="folder holding the other tree's pagemind/ links")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--http", action="store_true", help="the model over HTTP in another process")
    parser.add_argument(
        "--every",
        action="store_true",
        help="with --http: every configuration of "
        "bench.step_overhead_http (10 to 10,000 stored, windows 9 to 501), and its flatness",
    )
    parser.add_argument("--label", default="the other tree", help="what the other tree is, for the report")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--worker", action="store_true")
    args = parser.parse_args()
    from pagemind.runtime.process.logs import configure_logging

    configure_logging("ERROR")
    if args.worker:
        with tempfile.TemporaryDirectory() as tmp:
            result = (
                _http_worker(args.turns, Path(tmp), args.every)
                if args.http
                else asyncio.run(_worker(args.turns, Path(tmp)))
            )
            print(json.dumps(result))
        return
    note = machine_note()
    mine, other = [], []
    for _ in range(args.rounds):
        other.append(_run(args.other, args.turns, args.http, args.every))
        mine.append(_run(None, args.turns, args.http, args.every))
        print(f"other {other[-1]}  this {mine[-1]}", flush=True)
    if args.every:
        return report_every(mine, other, args, note)
    rows = []
    for key in ("wall", "cpu"):  # with --http, "wall" is the own cost (wall minus the bare round trip)
        a, b = median([m[key] for m in mine]), median([o[key] for o in other])
        rows.append((key, a, b))
        print(f"{key}: this {a:.2f} ms, other {b:.2f} ms, ratio {a / b:.2f}")
    load = os.getloadavg()
    print(f"load average {load}")
    if args.no_write:
        return
    what = "own cost p50 (wall − bare round trip)" if args.http else "wall p50"
    table = "\n".join(
        f"| {what if key == 'wall' else 'CPU p50 (process_time)'} | {b:.2f} | {a:.2f} | {a / b:.2f} |"
        for key, a, b in rows
    )
    mode = "over HTTP (1,000 stored, window 51)" if args.http else "in process (1,000 stored, window 20)"
    write_section(
        "step_cost_ab.http" if args.http else "step_cost_ab.in_process",
        f"Step cost A/B, {mode}",
        f"""
{note}; load average {load[0]:.2f} at the end. {args.rounds} rounds, each a fresh process per tree in turn,
{args.turns} one-step turns per process (first 20 dropped for the in-process mode, 10 over HTTP); medians of the
rounds' medians, ms per step. This tree against {args.label}.

| figure | {args.label} | this tree | ratio |
| --- | --- | --- | --- |
{table}
""",
    )


def report_every(
    mine: list[dict[str, float]], other: list[dict[str, float]], args: argparse.Namespace, note: str
) -> None:
    """The block of an `--http --every` run: own cost and CPU per configuration, each tree's flatness."""
    from bench.step_overhead_http import CONFIGS

    a = {key: median([m[key] for m in mine]) for key in mine[0]}
    b = {key: median([o[key] for o in other]) for key in other[0]}
    rows = "\n".join(
        " | ".join(
            [
                "",
                f"{s:,}",
                str(w),
                *(
                    f"{b[f'{key} {s}/{w}']:.2f} | **{a[f'{key} {s}/{w}']:.2f}** | "
                    f"{a[f'{key} {s}/{w}'] / b[f'{key} {s}/{w}']:.2f}"
                    for key in ("own", "own_cpu", "cpu")
                ),
                "",
            ]
        ).strip()
        for s, w in CONFIGS
    )
    flat = {
        tree: " · ".join(f"{s:,}/{w}: {v[f'{key} {s}/{w}'] / v[f'{key} 10/9']:.2f}" for s, w in CONFIGS[1:])
        for key in ("own", "own_cpu")
        for tree, v in ((f"other {key}", b), (f"this {key}", a))
    }
    load = os.getloadavg()
    print(rows, flat, load, sep="\n")
    if args.no_write:
        return
    pairs = ((f"{what}, {args.label}", f"{what}, this tree", "ratio") for what in ("own cost", "own CPU", "CPU"))
    head = table_row("stored", "in window", *(cell for cells in pairs for cell in cells))
    write_section(
        "step_cost_ab.every",
        "Step cost A/B, over HTTP, every configuration",
        f"""
{note}; load average {load[0]:.2f} at the end. {args.rounds} rounds, each a fresh process per tree in turn, each
process running `bench.step_overhead_http`'s rotation ({args.turns} one-step turns per configuration, first 10
dropped); medians of the rounds' medians, ms per step. Own cost = wall p50 − the bare round trip's p50; own CPU =
the agent process's CPU per step − its CPU for the bare POST (p50s): the own cost of an idle machine, where no
wait for a CPU adds to the wall time. This tree against {args.label}.

{head}
| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |
{rows}

Own cost relative to 10 stored (window 9), {args.label}: {flat["other own"]}; this tree: {flat["this own"]}.
Own CPU relative to 10 stored, {args.label}: {flat["other own_cpu"]}; this tree: {flat["this own_cpu"]}.
Target: own cost p50 ≤ 3 ms and flat (10,000 vs 10 within 20 %).
""",
    )


if __name__ == "__main__":
    main()
