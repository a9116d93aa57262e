"""The daemon's throughput, this checkout against another (main), or with its shortcuts on against each one off,
interleaved in one run (issue 12).

Runs this checkout's `bench.daemon_throughput --no-write` with each checkout's own interpreter
(`<checkout>/.venv/bin/python`, whose editable install serves that checkout's daemon; the client is the same for
both), one measurement at a time, alternating which goes first from round to round so
that a change in the machine's load falls on both; on Postgres also this checkout with `--workers N`. Reports
the median of each figure over the rounds and the ratios to the other checkout, and writes its block of
bench/RESULTS.md unless --no-write.

    python -m bench.daemon_ab --base /path/to/main-checkout [--rounds 3] [--agents 10 100] [--workers 2]
                              [--inflight 64] [--section KEY]
    python -m bench.daemon_ab --off linger hold_steps [--rounds 3] ...
    python -m bench.daemon_ab --base /path/to/main-checkout --off hand_off [--rounds 3] ...

`--off NAME…`: this checkout with every shortcut on (`DaemonConfig`'s defaults) against each named one switched
off (`pagemind serve --set`: `linger` is `linger_s=0`, the others `NAME=false`); the ratios are to "all on". With
`--base` too, the other checkout, this one, and this one with each named shortcut off, in one run; the ratios are
to the other checkout.
"""

from __future__ import annotations

import argparse
import os
import subprocess
from pathlib import Path

from bench.common import ROOT, bench_argv, machine_note, median, write_section

FIELDS = (
    "db",
    "agents",
    "turns",
    "failed",
    "turns_s",
    "steps_s",
    "overhead",
    "p50_step",
    "cpu_ms_step",
    "rss_mb",
    "rss_kb_agent",
    "create_s",
    "load",
)


def measure(
    checkout: Path, db: str, agents: int, turns: int, workers: int, inflight: int, settings: tuple[str, ...] = ()
) -> dict[str, float]:
    """One row of this checkout's bench.daemon_throughput run with `checkout`'s interpreter, whose editable install
    serves that checkout's daemon: both variants are driven by the same client (the bench's own CPU, on the cores
    the daemon shares, would otherwise differ between them)."""
    python = checkout / ".venv" / "bin" / "python"
    command = bench_argv(
        str(python),
        "daemon_throughput",
        "--agents",
        str(agents),
        "--db",
        db,
        "--turns",
        str(turns),
        "--inflight",
        str(inflight),
        "--no-write",
    )
    command += [part for setting in settings for part in ("--set", setting)]
    if workers > 1:
        command += ["--workers", str(workers)]
    out = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=True, timeout=1800).stdout
    line = next(row for row in out.splitlines() if row.startswith(f"| {db} |"))
    cells = [cell.strip() for cell in line.strip("|").split("|")]
    row = dict(zip(FIELDS, cells, strict=False))  # the table has more columns than FIELDS names
    return {
        "failed": float(row["failed"]),
        "steps_s": float(row["steps_s"]),
        "p50_step": float(row["p50_step"]),
        "cpu_ms_step": float(row["cpu_ms_step"]),
        "load": float(row["load"]),
    }


def switched_off(shortcut: str) -> str:
    """The `pagemind serve --set` that switches a shortcut off."""
    return "linger_s=0" if shortcut == "linger" else f"{shortcut}=false"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, help="the other checkout (with its own .venv)")
    parser.add_argument(
        "--off", nargs="+", default=[], metavar="SHORTCUT", help="compare each shortcut off against all on instead"
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--agents", type=int, nargs="+", default=[10, 100])
    parser.add_argument("--db", nargs="+", default=["sqlite", "postgres"])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--workers", type=int, default=2, help="also this checkout with --workers N (Postgres)")
    parser.add_argument(
        "--inflight",
        type=int,
        default=64,
        help="client requests in flight (1 with --agents 1: the own overhead at low load)",
    )
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument(
        "--section",
        default=None,
        help="the key of the bench/RESULTS.md block to write (`<!-- bench:KEY -->`)",
    )
    args = parser.parse_args()
    if not (args.base or args.off):
        parser.error("give --base (another checkout), --off (shortcuts of this one), or both")
    note = machine_note()
    reference = "main" if args.base else "all on"
    offs = [(f"{name} off", ROOT, 1, (switched_off(name),)) for name in args.off]
    variants: list[tuple[str, Path, int, tuple[str, ...]]] = (
        [("main", args.base.resolve(), 1, ()), ("branch", ROOT, 1, ()), *offs]
        if args.base
        else [("all on", ROOT, 1, ()), *offs]
    )
    results: dict[tuple[str, str, int], list[dict[str, float]]] = {}
    for round_ in range(args.rounds):
        for db in args.db:
            for agents in args.agents:
                order = variants if round_ % 2 == 0 else variants[::-1]
                if db == "postgres" and args.workers > 1 and args.base:
                    order = [*order, (f"branch --workers {args.workers}", ROOT, args.workers, ())]
                for name, checkout, workers, settings in order:
                    row = measure(checkout, db, agents, args.turns, workers, args.inflight, settings)
                    results.setdefault((name, db, agents), []).append(row)
                    print(f"round {round_ + 1} {db} {agents} {name}: {row}", flush=True)
    lines = [
        "| db | agents | variant | model steps/s | own overhead p50 per step (ms) | daemon CPU per step (ms) | "
        f"steps/s vs {reference} | CPU/step vs {reference} | failed | load (runs) |",
        "| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |",
    ]
    for db in args.db:
        for agents in args.agents:
            base = results[(reference, db, agents)]
            for (name, d, n), rows in results.items():
                if (d, n) != (db, agents):
                    continue
                steps = median([r["steps_s"] for r in rows])
                cpu = median([r["cpu_ms_step"] for r in rows])
                ratio_steps = steps / median([r["steps_s"] for r in base])
                ratio_cpu = cpu / median([r["cpu_ms_step"] for r in base])
                loads = ", ".join(f"{r['load']:.1f}" for r in rows)
                lines.append(
                    f"| {db} | {agents} | {name} | {steps:.1f} | {median([r['p50_step'] for r in rows]):.1f} "
                    f"| {cpu:.2f} | {ratio_steps:.2f} | {ratio_cpu:.2f} | "
                    f"{int(sum(r['failed'] for r in rows))} | {loads} |"
                )
    if not args.base:
        body = (
            f"{note}; load average {os.getloadavg()[0]:.2f} at the end. `python -m bench.daemon_ab --off "
            f"{' '.join(args.off)} --rounds {args.rounds} --agents {' '.join(map(str, args.agents))} --turns "
            f"{args.turns} --inflight {args.inflight}`: bench.daemon_throughput (50 ms stub model, 2 steps a turn) "
            "of this checkout with every shortcut on and with each one off, the order turned round each round; "
            "medians over the rounds, ratios to all on (steps/s: higher is better; CPU: lower is better).\n\n"
            + "\n".join(lines)
        )
        print(body)
        if not args.no_write:
            write_section(args.section or "daemon_ab.shortcuts", "Daemon shortcuts on and off", body)
        return
    off = f" --off {' '.join(args.off)}" if args.off else ""
    body = (
        f"{note}; load average {os.getloadavg()[0]:.2f} at the end. "
        f"`python -m bench.daemon_ab --base <main checkout>{off} --rounds {args.rounds} --agents "
        f"{' '.join(map(str, args.agents))} --turns {args.turns} --workers {args.workers} --inflight {args.inflight}`: "
        f"bench.daemon_throughput (50 ms stub model, 2 steps a turn, {args.inflight} requests in flight) of main and "
        f"of this branch{' (and with each named shortcut off)' if args.off else ''}, the order turned round each "
        f"round, {args.rounds} rounds; medians over "
        "the rounds, ratios to main's medians (steps/s: higher is better; CPU: lower is better).\n\n" + "\n".join(lines)
    )
    print(body)
    if not args.no_write:
        title = "Daemon throughput, main against this branch"
        section = args.section or "daemon_ab"
        write_section(section, title if section == "daemon_ab" else f"{title} ({section})", body)


if __name__ == "__main__":
    main()
