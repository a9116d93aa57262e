"""`pagemind serve --workers N`: N daemon processes on one port and one PostgreSQL database, so that one machine's
daemon uses all of its cores.

One daemon process runs everything on one event loop, and its database calls block that loop while they wait
for the server, so a single process uses about one core at best. Daemons on one Postgres already share the work
safely (`scheduler.queue.leases`: per-agent order, each item once, crash takeover), so `--workers` only starts N
ordinary `pagemind serve` processes that all listen on the same port with `SO_REUSEPORT` (Linux spreads the
incoming connections over them) and supervises them:

- a signal (SIGTERM, SIGINT) is passed on to every worker, which stops gracefully as a single daemon does; a
  second one ends them at once (the workers run in their own session, so a Ctrl-C reaches them only this way);
- a worker that dies is started again (its agents are taken over by the others at once: `Leases.sweep`), unless
  it died within `STARTUP_S` of its start (a port in use, a bad database URL): then every worker is stopped and
  the exit status is the failed worker's;
- the exit status is 0 when every worker stopped cleanly.

A request may reach any worker: each one answers for every agent, and a run another worker executes is waited
for through the database and its events are relayed (`scheduler.streams.relay`). SQLite has no relay and one writer at a
time, so `--workers` needs Postgres.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import time
from typing import Any

STARTUP_S = 10.0  # a worker that exits sooner than this after its start failed to start: no restart
RESTART_DELAY_S = 1.0  # between a worker's death and its restart (a crash loop stays slow)


def worker_argv(args: argparse.Namespace, url: str) -> list[str]:
    """The command line of one worker: the same `serve`, one process, binding with `SO_REUSEPORT`."""
    return [
        sys.executable,
        "-m",
        "pagemind.scheduler.cli",
        "serve",
        str(args.directory),
        "--host",
        args.host,
        "--port",
        str(args.port),
        "--concurrency",
        str(args.concurrency),
        "--grace",
        str(args.grace),
        "--max-body",
        str(args.max_body),
        "--public-url",
        url,
        "--reuse-port",
        *(part for setting in args.daemon_settings for part in ("--set", setting)),
    ]


async def supervise(args: argparse.Namespace, url: str) -> int:
    """Run `args.workers` workers until a signal stops them (see the module docstring); returns the exit status."""
    argv = worker_argv(args, url)
    loop = asyncio.get_running_loop()
    stopping: list[int] = []
    workers: dict[int, tuple[Any, float]] = {}  # slot → (process, started at)

    async def start(slot: int) -> None:
        process = await asyncio.create_subprocess_exec(*argv, start_new_session=True)
        workers[slot] = (process, time.monotonic())

    def on_signal(sig: int) -> None:
        stopping.append(sig)
        for process, _ in workers.values():
            if process.returncode is None:
                process.send_signal(sig)

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal, sig)
    status = 0
    try:
        for slot in range(args.workers):
            await start(slot)
        sys.stderr.write(
            f"pagemind: {args.workers} workers on {url} (pids {', '.join(str(p.pid) for p, _ in workers.values())})\n"
        )
        sys.stderr.flush()
        waits = {slot: asyncio.ensure_future(process.wait()) for slot, (process, _) in workers.items()}
        while waits:
            done, _ = await asyncio.wait(waits.values(), return_when=asyncio.FIRST_COMPLETED)
            for slot in [s for s, w in waits.items() if w in done]:
                code = waits.pop(slot).result()
                process, started = workers[slot]
                if stopping:
                    status = status or code
                    continue
                if time.monotonic() - started < STARTUP_S:
                    sys.stderr.write(f"pagemind: worker {process.pid} exited {code} at its start; stopping\n")
                    status = code or 1
                    on_signal(signal.SIGTERM)
                    continue
                sys.stderr.write(f"pagemind: worker {process.pid} exited {code}; starting another\n")
                await asyncio.sleep(RESTART_DELAY_S)
                if stopping:
                    continue
                await start(slot)
                waits[slot] = asyncio.ensure_future(workers[slot][0].wait())
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        for process, _ in workers.values():  # an exception here (none expected): leave no worker behind
            if process.returncode is None:
                process.kill()
    return status
