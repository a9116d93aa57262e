"""A/B of the runtime's own cost per step: this tree against another, interleaved in one run (issue 11).

Each round runs `bench/step_overhead.py`'s agent (companion, in-process instant model, SQLite, 20 messages in
the window) at 1,000 stored messages in a fresh process per tree, alternating trees, and records the median
wall time and CPU time (`time.process_time`) per step. The other tree comes as a folder holding
`pagemind/{runtime,tools,blocks,scheduler}` (links to that tree's folders), put first on PYTHONPATH. Reports the
ratio of the medians over rounds (this tree / other); CPU is the steadier figure on a shared machine.
With --http, each round runs `bench/step_overhead_http.py`'s rotation for one configuration (1,000 stored, window
51, the model a local server in another process) and reports its own cost (wall minus the bare round trip) and
CPU per step.

    python bench/step_cost_ab.py --other /tmp/basepkg --label "main 292d79a" [--rounds 5] [--turns 300] [--http]

Writes its section of bench/RESULTS.md (one per mode) unless --no-write.
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

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import machine_note, median, write_section  # noqa: E402

HISTORY = 1_000


async def _worker(turns: int, home: Path) -> dict[str, float]:
    from bench.step_overhead import IN_CONTEXT, seed_history
    from pagemind.runtime.agent import Agent
    from pagemind.runtime.spec import load_spec
    from pagemind.runtime.state.engine import make_engine
    from pagemind.runtime.state.store import StateStore
    from pagemind.runtime.testing import FunctionModel, tool_call_body

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


def _http_worker(turns: int, home: Path) -> dict[str, float]:
    from bench import step_overhead_http as http

    server = subprocess.Popen([sys.executable, http.__file__, "--serve"], stdout=subprocess.PIPE, text=True)
    try:
        url = f"http://127.0.0.1:{server.stdout.readline().strip()}/v1"
        os.environ.update(PAGEMIND_HOME=str(home), OPENAI_BASE_URL=url)
        os.environ.pop("DATABASE_URL", None)
        row = asyncio.run(http.measure(turns, url, home, configs=((HISTORY, 51),)))[0]
    finally:
        server.kill()
        server.wait()
    return {"wall": row["own"], "cpu": row["cpu"]}


def _run(pythonpath: str | None, turns: int, http: bool) -> dict[str, float]:
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run([sys.executable, __file__, "--worker", "--turns", str(turns), *(["--http"] if http else [])],
                         env=env, check=True,
                         capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--other", help="folder holding the other tree's pagemind/ links")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--http", action="store_true", help="the model over HTTP in another process")
    parser.add_argument("--label", default="the other tree", help="what the other tree is, for the report")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--worker", action="store_true")
    args = parser.parse_args()
    from pagemind.runtime.logs import configure_logging

    configure_logging("ERROR")
    if args.worker:
        with tempfile.TemporaryDirectory() as tmp:
            result = _http_worker(args.turns, Path(tmp)) if args.http else asyncio.run(_worker(args.turns, Path(tmp)))
            print(json.dumps(result))
        return
    note = machine_note()
    mine, other = [], []
    for _ in range(args.rounds):
        other.append(_run(args.other, args.turns, args.http))
        mine.append(_run(None, args.turns, args.http))
        print(f"other {other[-1]}  this {mine[-1]}", flush=True)
    rows = []
    for key in ("wall", "cpu"):  # with --http, "wall" is the own cost (wall minus the bare round trip)
        a, b = median([m[key] for m in mine]), median([o[key] for o in other])
        rows.append((key, a, b))
        print(f"{key}: this {a:.2f} ms, other {b:.2f} ms, ratio {a / b:.2f}")
    load = os.getloadavg()
    print(f"load average {load}")
    if args.no_write:
        return
    what = ("own cost p50 (wall − bare round trip)" if args.http else "wall p50")
    table = "\n".join(f"| {what if key == 'wall' else 'CPU p50 (process_time)'} | {b:.2f} | {a:.2f} | {a / b:.2f} |"
                      for key, a, b in rows)
    mode = "over HTTP (1,000 stored, window 51)" if args.http else "in process (1,000 stored, window 20)"
    write_section(f"Step cost A/B, {mode} (bench/step_cost_ab.py)", f"""
{note}; load average {load[0]:.2f} at the end. {args.rounds} rounds, each a fresh process per tree in turn,
{args.turns} one-step turns per process (first 20 dropped for the in-process mode, 10 over HTTP); medians of the
rounds' medians, ms per step. This tree against {args.label}.

| figure | {args.label} | this tree | ratio |
| --- | --- | --- | --- |
{table}
""")


if __name__ == "__main__":
    main()
