"""Loading an agent (`Agent.load`), in process: CPU per load of an agent that exists and whose spec is unchanged —
what a daemon does at a user's first message after the agent was unloaded, and `pagemind run` at every start.

Creates 50 agents (three blocks, a few turns' messages each), then loads each of them `--rounds` times and reports
the median CPU per load on SQLite and on Postgres. With `--base CHECKOUT` it also runs itself with that
checkout's interpreter (`CHECKOUT/.venv/bin/python`, whose editable install is that checkout's code), alternating
which goes first, and reports the ratios.

    python -m bench.agent_load [--base /path/to/main-checkout] [--repeat 3] [--no-write]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

from bench.common import (
    ROOT,
    alternating,
    bench_argv,
    checkout_pythons,
    drop_postgres,
    machine_note,
    median,
    scratch_postgres,
    write_section,
)

AGENTS = 50
AT = datetime(2026, 12, 1, tzinfo=UTC)


def measure(database_url: str, rounds: int) -> float:
    """Median CPU milliseconds per `Agent.load` of an existing, unchanged agent."""
    from pagemind.runtime.agent import Agent
    from pagemind.runtime.messages import Message
    from pagemind.runtime.process.settings import Settings
    from pagemind.runtime.state.store import StateStore
    from pagemind.runtime.testing.specs import build_spec

    store, settings = StateStore.open(database_url), Settings.from_env()
    specs = [build_spec(f"agent-{i}") for i in range(AGENTS)]
    for spec in specs:
        agent = asyncio.run(Agent.load(spec, store=store, settings=settings))
        for n in range(6):
            asyncio.run(store.accept_message(agent.record.id, Message("user", f"message {n}", AT, turn_id=f"t{n}")))
    times = []
    for _ in range(rounds):
        for spec in specs:
            start = time.process_time()
            asyncio.run(Agent.load(spec, store=store, settings=settings))
            times.append(time.process_time() - start)
    return median(times) * 1000


def run_here(rounds: int) -> dict[str, float]:
    """{db: ms} measured in this process."""
    from pagemind.runtime.process.logs import configure_logging

    configure_logging()
    out = {}
    with tempfile.TemporaryDirectory() as folder:
        out["sqlite"] = measure(f"sqlite:///{folder}/load.db", rounds)
    url = scratch_postgres("agentload")
    try:
        out["postgres"] = measure(url, rounds)
    finally:
        drop_postgres(url)
    return out


def run_with(python: str, rounds: int) -> dict[str, float]:
    """{db: ms} measured by `python` running this module (`--json`)."""
    done = subprocess.run(
        bench_argv(python, "agent_load", "--json", "--rounds", str(rounds)),
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=1800,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, help="another checkout (with its own .venv) to compare with")
    parser.add_argument("--rounds", type=int, default=4, help="loads of each agent per measurement")
    parser.add_argument("--repeat", type=int, default=3, help="measurements of each checkout (medians reported)")
    parser.add_argument("--json", action="store_true", help="print this checkout's figures as JSON and exit")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    if args.json:
        print(json.dumps(run_here(args.rounds)))
        return
    note = machine_note()
    checkouts = checkout_pythons(args.base)
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in checkouts}
    for i in range(args.repeat):
        for name in alternating(list(checkouts), i):
            runs[name].append(run_with(checkouts[name], args.rounds))
    rows = [
        "| database | "
        + " | ".join(f"{name}: CPU ms per load (median)" for name in checkouts)
        + (" | this / base |" if args.base else " |"),
        "| --- |" + " ---: |" * (len(checkouts) + (1 if args.base else 0)),
    ]
    for db in ("sqlite", "postgres"):
        medians = {name: median([run[db] for run in runs[name]]) for name in checkouts}
        ratio = f" ×{medians['this tree'] / medians['base']:.2f} |" if args.base else ""
        rows.append(f"| {db} | " + " | ".join(f"{value:.2f}" for value in medians.values()) + " |" + ratio)
    body = (
        f"{note}. `python -m bench.agent_load{' --base <checkout>' if args.base else ''} --rounds {args.rounds} "
        f"--repeat {args.repeat}`: {AGENTS} agents (three blocks, six messages each), each loaded {args.rounds} "
        f"times per measurement; medians of {args.repeat} measurements per checkout, alternating which runs "
        "first.\n\n" + "\n".join(rows)
    )
    print(body)
    if not args.no_write:
        write_section("agent_load", "Agent load", body)


if __name__ == "__main__":
    main()
