"""Making agents from a template in process (`Daemon.create_agent`, what `POST /v1/agents` calls): wall and CPU time
per agent, this tree against another checkout (`--base`, with its own virtual environment), interleaved in fresh
processes on fresh databases.

    python -m bench.agent_create --base /path/to/main-checkout [--rounds 3] [--agents 300] [--db postgres sqlite]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
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

TEMPLATE = """
name: companion
template: true
model: {name: gpt-4o-mini, context_window: 8192, max_output_tokens: 256}
system: You are a warm companion.
blocks:
  - {label: persona, value: "I am warm and brief.", limit: 200}
  - {label: human, value: "", limit: 200}
"""


def child(url: str, agents: int) -> dict[str, float]:
    """Make `agents` agents with this process's pagemind; ms of wall and CPU time per agent."""
    from pagemind.runtime.process.logs import configure_logging
    from pagemind.runtime.process.settings import Settings
    from pagemind.runtime.state.store import StateStore
    from pagemind.scheduler.catalog import AgentCatalog
    from pagemind.scheduler.daemon import Daemon

    configure_logging("WARNING")
    home = Path(tempfile.mkdtemp())
    (home / "agents").mkdir()
    (home / "agents" / "companion.yaml").write_text(TEMPLATE)
    settings = Settings.from_env({"PAGEMIND_HOME": str(home), "DATABASE_URL": url})
    daemon = Daemon(AgentCatalog(home / "agents", StateStore.open(url)), settings)
    daemon.create_agent("warm-up", template="companion")
    wall, cpu = time.perf_counter(), time.process_time()
    for i in range(agents):
        daemon.create_agent(f"user-{i:05d}", template="companion", blocks={"human": f"User {i}."})
    return {
        "wall_ms": (time.perf_counter() - wall) * 1000 / agents,
        "cpu_ms": (time.process_time() - cpu) * 1000 / agents,
    }


def database(kind: str) -> str:
    return f"sqlite:///{tempfile.mkdtemp()}/create.db" if kind == "sqlite" else scratch_postgres("ac")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, required=False)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--agents", type=int, default=300)
    parser.add_argument("--db", nargs="+", default=["postgres", "sqlite"])
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--child", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child[0], int(args.child[1]))))
        return
    note = machine_note()
    variants = checkout_pythons(args.base)
    got: dict[tuple[str, str], list[dict[str, float]]] = {}
    for n in range(args.rounds):
        for db in args.db:
            for variant in alternating(list(variants), n):
                url = database(db)
                try:
                    done = subprocess.run(
                        bench_argv(variants[variant], "agent_create", "--child", url, str(args.agents)),
                        cwd=ROOT,
                        capture_output=True,
                        text=True,
                        timeout=900,
                        check=True,
                    )
                finally:
                    if url.startswith("postgresql"):
                        drop_postgres(url)
                got.setdefault((db, variant), []).append(json.loads(done.stdout.strip().splitlines()[-1]))
    lines = [
        "| db | tree | wall ms per agent (median of runs) | CPU ms per agent | runs (wall) |",
        "| --- | --- | ---: | ---: | --- |",
    ]
    for db in args.db:
        for variant in variants:
            runs = got[(db, variant)]
            walls = ", ".join(f"{r['wall_ms']:.1f}" for r in runs)
            lines.append(
                f"| {db} | {variant} | {statistics.median(r['wall_ms'] for r in runs):.2f} | "
                f"{statistics.median(r['cpu_ms'] for r in runs):.2f} | {walls} |"
            )
    if args.base:
        lines.append("")
        for db in args.db:
            ratio = {
                k: statistics.median(r[k] for r in got[(db, "this tree")])
                / statistics.median(r[k] for r in got[(db, "base")])
                for k in ("wall_ms", "cpu_ms")
            }
            lines.append(f"- {db}: this tree / base: wall {ratio['wall_ms']:.2f}, CPU {ratio['cpu_ms']:.2f}")
    body = (
        f"{note}; `python -m bench.agent_create --rounds {args.rounds} --agents {args.agents}"
        f"{' --base <main>' if args.base else ''}`: agents made from a template with a block value, in "
        "process (no HTTP), each tree and database a fresh process, interleaved.\n\n" + "\n".join(lines)
    )
    print(body)
    if not args.no_write:
        write_section("agent_create", "Making agents from a template", body)


if __name__ == "__main__":
    main()
