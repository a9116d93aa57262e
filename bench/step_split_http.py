"""Where the CPU of a step over real HTTP goes, phase by phase, in this tree and another, interleaved (issue 11).

Each round runs `bench.step_overhead_http`'s setting for one configuration (the companion agent through the
Python API, a local instant OpenAI-compatible server in another process, SQLite) in a fresh process per tree,
alternating trees. Every phase of the turn is timed with `time.process_time()` by a wrapper around the function
that does it (a few µs each, alike in both trees), so the phases add up to the turn:

- lock and refresh: the turn lock, and reading again what another process changed (`Agent.refresh`);
- accept: the user message into the inbox (`turn_start.begin_turn`);
- prefetch: the salience gate and, when it says so, the archival search (`Agent.prefetch`);
- compile: history check, compile, pressure reading (`PressureMonitor.relieve`);
- body: the request's bytes (`ModelRequest.encoded`);
- request building: the model client's attempt minus the body, the parse and httpx's send (the SDK's `post`, or
  the lean post; retries wrapper and deadline scope included);
- httpx send: `httpx.AsyncClient.send` (connection pool, h11, sockets: what any HTTP client pays);
- parse: the response's JSON and its validation (`response_from_http`);
- tools, commit: dispatching the tool calls, and the step's transaction (`loop.dispatch`, `loop.commit`);
- the rest: everything else of the turn (the retry loop, events, the turn's bookkeeping).

    python -m bench.step_split_http --other /tmp/basepkg --label "main abc123" [--rounds 5] [--turns 300]
        [--config 1000:51]

Writes its block of bench/RESULTS.md unless --no-write.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.common import ROOT, bench_argv, machine_note, median, write_section

PHASES = (
    "lock and refresh",
    "accept",
    "prefetch",
    "compile",
    "body",
    "request building",
    "httpx send",
    "parse",
    "tools",
    "commit",
    "the rest",
)
_spent: dict[str, float] = {}


def _timed(owner: object, name: str, phase: str) -> None:
    """Wrap `owner.name` so that its CPU time adds to `phase` (coroutine functions too)."""
    original = getattr(owner, name)

    def add(started: float) -> None:
        _spent[phase] = _spent.get(phase, 0.0) + time.process_time() - started

    if asyncio.iscoroutinefunction(original):

        @functools.wraps(original)
        async def wrapper(*args, **kwargs):
            started = time.process_time()
            try:
                return await original(*args, **kwargs)
            finally:
                add(started)
    else:

        @functools.wraps(original)
        def wrapper(*args, **kwargs):
            started = time.process_time()
            try:
                return original(*args, **kwargs)
            finally:
                add(started)

    setattr(owner, name, wrapper)


def _install() -> None:
    import httpx

    from pagemind.runtime import agent, loop
    from pagemind.runtime.model import client as model_client
    from pagemind.runtime.pressure import monitor

    try:
        from pagemind.runtime import turn_start
    except ImportError:  # the other tree may predate `turn_start`: its turns began in the loop module
        turn_start = loop

    _timed(agent.Agent, "refresh", "refresh")
    _timed(turn_start, "begin_turn", "accept")  # looked up there, by `begin_app_turn`
    _timed(agent.Agent, "prefetch", "prefetch")
    _timed(monitor.PressureMonitor, "relieve", "compile")
    _timed(model_client.ModelRequest, "encoded", "body")
    _timed(model_client.OpenAIModelClient, "_bounded", "attempt")
    _timed(httpx.AsyncClient, "send", "httpx send")
    _timed(model_client, "response_from_http", "parse")
    _timed(loop, "dispatch", "tools")
    _timed(loop, "commit", "commit")


async def _measure(turns: int, stored: int, window: int, home: Path) -> dict[str, float]:
    from bench import step_overhead_http as http

    _install()
    agent = await http.load(stored, window, home)
    totals: list[float] = []
    sums: dict[str, float] = {}
    for i in range(turns):
        _spent.clear()
        started = time.process_time()
        await agent.send(f"turn {i}: how was your day?")
        total = time.process_time() - started
        agent.window.messages = agent.window.messages[-window:]
        if i < 10:  # the first turns load the encoding, the SDK, the pool
            continue
        totals.append(total * 1000)
        spent = dict(_spent)
        spent["request building"] = spent.pop("attempt", 0.0) - sum(
            spent.get(k, 0.0) for k in ("body", "httpx send", "parse")
        )
        spent["lock and refresh"] = spent.pop("refresh", 0.0)
        spent["the rest"] = total - sum(spent.values())  # the lock's time is in here, less the refresh
        for phase, seconds in spent.items():
            sums[phase] = sums.get(phase, 0.0) + seconds * 1000
    counted = len(totals)
    return {
        "total_median": median(totals),
        "total_mean": sum(totals) / counted,
        **{phase: sums.get(phase, 0.0) / counted for phase in PHASES},
    }


def _worker(turns: int, stored: int, window: int) -> dict[str, float]:

    server = subprocess.Popen(
        bench_argv(sys.executable, "step_overhead_http", "--serve"), cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        url = f"http://127.0.0.1:{server.stdout.readline().strip()}/v1"
        with tempfile.TemporaryDirectory() as tmp:
            os.environ.update(PAGEMIND_HOME=tmp, OPENAI_BASE_URL=url)
            os.environ.pop("DATABASE_URL", None)
            return asyncio.run(_measure(turns, stored, window, Path(tmp)))
    finally:
        server.kill()
        server.wait()


def _run(pythonpath: str | None, args: argparse.Namespace) -> dict[str, float]:
    env = dict(os.environ)
    if pythonpath:
        env["PYTHONPATH"] = pythonpath + os.pathsep + env.get("PYTHONPATH", "")
    out = subprocess.run(
        bench_argv(sys.executable, "step_split_http", "--worker", "--turns", str(args.turns), "--config", args.config),
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
    parser.add_argument("--label", default="the other tree")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--config", default="1000:51", help="stored:window")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--worker", action="store_true")
    args = parser.parse_args()
    from pagemind.runtime.process.logs import configure_logging

    configure_logging("ERROR")
    stored, window = map(int, args.config.split(":"))
    if args.worker:
        print(json.dumps(_worker(args.turns, stored, window)))
        return
    note = machine_note()
    mine: list[dict[str, float]] = []
    other: list[dict[str, float]] = []
    for _ in range(args.rounds):
        other.append(_run(args.other, args))
        mine.append(_run(None, args))
        print(f"other {other[-1]['total_mean']:.2f} ms, this {mine[-1]['total_mean']:.2f} ms", flush=True)
    load = os.getloadavg()[0]
    keys = (*PHASES, "total_mean", "total_median")
    a = {key: median([m[key] for m in mine]) for key in keys}
    b = {key: median([o[key] for o in other]) for key in keys}
    names = {"total_mean": "**turn, mean**", "total_median": "turn, median"}
    table = "\n".join(
        f"| {names.get(key, key)} | {b[key]:.3f} | {a[key]:.3f} | {a[key] - b[key]:+.3f} |" for key in keys
    )
    print(table)
    if args.no_write:
        return
    write_section(
        "step_split_http",
        f"Step CPU split over HTTP ({stored:,} stored, window {window})",
        f"""
{note}; load average {load:.2f} at the end. {args.rounds} rounds, each a fresh process per tree in turn, {args.turns}
one-step turns per process (first 10 dropped): the companion agent over a local instant OpenAI-compatible server
in another process, SQLite. CPU (`time.process_time`) per turn by phase, ms: the mean over a process's turns, the
median over rounds. This tree against {args.label}. Phases as the module's docstring defines them ("request
building" is the model client's attempt less the body, the parse and httpx's send).

| phase | {args.label} | this tree | difference |
| --- | --- | --- | --- |
{table}
""",
    )


if __name__ == "__main__":
    main()
