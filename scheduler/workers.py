"""`pagemind serve --workers N`: N daemon processes on one port and one PostgreSQL database, so that one machine's
daemon uses all of its cores.

One daemon process runs everything on one event loop, and its database calls block that loop while they wait
for the server, so a single process uses about one core at best. Daemons on one Postgres already share the work
safely (`scheduler.queue.leases`: per-agent order, each item once, crash takeover), so `--workers` only starts N
ordinary `pagemind serve` processes that all listen on the same port with `SO_REUSEPORT` (Linux spreads the
incoming connections over them) and supervises them:

- a signal (SIGTERM, SIGINT) is passed on to every worker, which stops gracefully as a single daemon does; a
  second one ends them at once (the workers run in their own session, so a Ctrl-C reaches them only this way);
- each worker says when it listens (a byte on a pipe, `--ready-fd`); until one has, the service has never served,
  and a worker that exits then failed to start for a reason every worker shares (a port in use, a bad database
  URL): every worker is stopped and the exit status is the failed worker's;
- once the service has served, a worker that dies is started again, whenever and however often it dies (its
  agents are taken over by the others at once: `Leases.sweep`), after a back-off that doubles with each death
  within `STABLE_S` of the worker's start (1, 2, 4 … `MAX_BACKOFF_S` seconds) and starts again from 1 s once a
  worker of its slot has run that long; slots restart independently, so the other workers serve meanwhile, and
  while no worker is up the wait is at most `ALONE_BACKOFF_S`;
- the exit status is 0 when every worker stopped cleanly.

A request may reach any worker: each one answers for every agent, and a run another worker executes is waited
for through the database and its events are relayed (`scheduler.streams.relay`). SQLite has no relay and one writer at a
time, so `--workers` needs Postgres.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import sys
import time
from dataclasses import dataclass
from typing import Any

STABLE_S = 10.0  # a worker that ran this long was healthy: its slot's back-off starts again from the first step
RESTART_DELAY_S = 1.0  # the first back-off step, between a worker's death and its restart
MAX_BACKOFF_S = 30.0  # the longest wait before a restart while another worker serves
ALONE_BACKOFF_S = 5.0  # the longest wait while no worker is up: the service comes back as soon as it can


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


@dataclass
class _Slot:
    """One worker's place: its current process, when it started, and its deaths in a row within `STABLE_S`."""

    process: Any = None
    started: float = 0.0
    quick_deaths: int = 0
    restarting: asyncio.Task[None] | None = None


def backoff_s(quick_deaths: int, others_up: bool) -> float:
    """The wait before a slot's restart: doubling with its deaths in a row, capped (lower while nobody serves)."""
    return min(RESTART_DELAY_S * (1 << min(quick_deaths, 16)), MAX_BACKOFF_S if others_up else ALONE_BACKOFF_S)


class _Supervisor:
    """The workers of one `serve --workers N`: started, watched, restarted with back-off, stopped on a signal."""

    def __init__(self, argv: list[str], count: int):
        self.argv, self.count = argv, count
        self.slots = [_Slot() for _ in range(count)]
        self.live: set[int] = set()  # slots whose worker's exit was not handled yet
        self.served = False  # some worker said it listens: deaths from now on are restarted, never fatal
        self.stopping: list[int] = []
        self.status = 0
        self.exits: asyncio.Queue[int] = asyncio.Queue()  # slots whose worker exited

    async def start(self, index: int) -> None:
        """Start the slot's worker with a pipe it writes a byte to once it listens."""
        slot = self.slots[index]
        read_end, write_end = os.pipe()
        try:
            process = await asyncio.create_subprocess_exec(
                *self.argv, "--ready-fd", str(write_end), pass_fds=(write_end,), start_new_session=True
            )
        finally:
            os.close(write_end)
        slot.process, slot.started = process, time.monotonic()
        self.live.add(index)
        loop = asyncio.get_running_loop()
        loop.add_reader(read_end, self._heard, read_end)
        exited = asyncio.ensure_future(process.wait())
        exited.add_done_callback(lambda _: self.exits.put_nowait(index))

    def _heard(self, read_end: int) -> None:
        """A worker's pipe spoke: a byte means it listens; end of file, that it exited first."""
        asyncio.get_running_loop().remove_reader(read_end)
        try:
            self.served = self.served or bool(os.read(read_end, 1))
        except OSError:
            pass
        os.close(read_end)

    def signal(self, sig: int) -> None:
        """Pass a signal on to every running worker; no restart from now on."""
        self.stopping.append(sig)
        for slot in self.slots:
            if slot.restarting is not None:
                slot.restarting.cancel()
            if slot.process is not None and slot.process.returncode is None:
                slot.process.send_signal(sig)

    def exited(self, index: int) -> None:
        """A worker exited: stop the service (a signal, or a failed first start) or restart it after its back-off."""
        slot = self.slots[index]
        code = slot.process.returncode
        self.live.discard(index)
        if self.stopping:  # a worker still starting has no handler yet: the signal itself ended it, as asked
            self.status = self.status or (0 if -code in self.stopping else code)
            return
        if not self.served:
            sys.stderr.write(f"pagemind: worker {slot.process.pid} exited {code} at its start; stopping\n")
            self.status = code or 1
            self.signal(signal.SIGTERM)
            return
        lived = time.monotonic() - slot.started
        slot.quick_deaths = slot.quick_deaths + 1 if lived < STABLE_S else 0
        delay = backoff_s(slot.quick_deaths, bool(self.live))
        sys.stderr.write(
            f"pagemind: worker {slot.process.pid} exited {code} after {lived:.1f} s; "
            f"starting another in {delay:g} s ({len(self.live)} of {self.count} running)\n"
        )
        slot.restarting = asyncio.ensure_future(self._restart(index, delay))

    async def _restart(self, index: int, delay: float) -> None:
        await asyncio.sleep(delay)
        slot = self.slots[index]
        slot.restarting = None
        if self.stopping:
            return
        try:
            await self.start(index)
        except OSError as exc:  # no process could be made (out of memory, of pids): try again after the next step
            slot.quick_deaths += 1
            delay = backoff_s(slot.quick_deaths, bool(self.live))
            sys.stderr.write(f"pagemind: cannot start a worker ({exc}); trying again in {delay:g} s\n")
            slot.restarting = asyncio.ensure_future(self._restart(index, delay))

    async def run(self, url: str) -> int:
        """Start every worker, then handle their exits until all have stopped after a signal or a failed start."""
        for index in range(self.count):
            await self.start(index)
        pids = ", ".join(str(s.process.pid) for s in self.slots)
        sys.stderr.write(f"pagemind: {self.count} workers on {url} (pids {pids})\n")
        sys.stderr.flush()
        while self.live or not self.stopping:
            self.exited(await self.exits.get())
            sys.stderr.flush()
        return self.status

    def kill_all(self) -> None:
        """Leave no worker behind (after an unexpected error)."""
        for slot in self.slots:
            if slot.restarting is not None:
                slot.restarting.cancel()
            if slot.process is not None and slot.process.returncode is None:
                slot.process.kill()


async def supervise(args: argparse.Namespace, url: str) -> int:
    """Run `args.workers` workers until a signal stops them (see the module docstring); returns the exit status."""
    supervisor = _Supervisor(worker_argv(args, url), args.workers)
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, supervisor.signal, sig)
    try:
        return await supervisor.run(url)
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
        supervisor.kill_all()
