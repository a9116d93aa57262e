"""A daemon process for the crash, scale-out and shutdown suites (tests/crash/test_daemon_crash.py,
tests/scheduler/test_daemon_scale.py), run as `python -m tests.support.daemon_child HOME URL FOLDER MODE [POINT [CONFIG]]` or forked
from the zygote below.

It serves an agents folder over a database with the ledger model (tests/support/daemon_support.py) and:
- `drain`: runs until the inbox has no open item, then stops and exits 0;
- `until:N`: runs until N items are finished, then stops and exits 0;
- `serve`: runs until SIGTERM or SIGINT, then stops gracefully (`Daemon.stop`) and exits 0;
- `converse:AGENT:FIRST:LAST`: submits "msg N" to AGENT for N from FIRST to LAST, one at a time in this process,
  each after the last one's turn (so from the second on, the agent's worker lingers here and is woken to claim it),
  appending N to HOME/accepted once its submission returned; then as `drain`.

The zygote (`python -m tests.support.daemon_child zygote`, started with PAGEMIND_KILL_AT set to a placeholder) imports
pagemind once with its crash points armed; for each line of JSON arguments on stdin it forks a child that arms its
own point (`runtime.process.crashpoints.arm`) and runs, and answers the child's exit code (-9: killed by its point). A kill
then costs a fork, not an interpreter and pagemind's imports.
"""

from __future__ import annotations

import json
import os
import sys


def child(home: str, database_url: str, folder: str, mode: str, point: str = "", config: str = "{}") -> None:
    """Run the daemon in `mode` with the crash point armed; exit 0 unless it fired."""
    import asyncio

    from pagemind.runtime.process import crashpoints

    if crashpoints.crash_point is crashpoints._kill_when_named:
        crashpoints.arm(point)
    asyncio.run(_main(home, database_url, folder, mode, json.loads(config)))
    os._exit(0)


async def _main(home: str, database_url: str, folder: str, mode: str, config: dict) -> None:
    import asyncio
    import signal

    from pagemind.runtime.process.logs import configure_logging
    from pagemind.runtime.process.settings import Settings
    from pagemind.runtime.state.store import StateStore
    from pagemind.scheduler.catalog import AgentCatalog
    from pagemind.scheduler.daemon import Daemon
    from pagemind.scheduler.daemon_config import DaemonConfig
    from pagemind.scheduler.queue.inbox_item import TERMINAL
    from tests.support.daemon_support import ledger_model

    configure_logging(os.environ.get("PAGEMIND_CHILD_LOG", "ERROR"))
    settings = Settings.from_env({"PAGEMIND_HOME": home, "DATABASE_URL": database_url})
    catalog = AgentCatalog(folder, StateStore.open(settings.database_url))
    daemon = Daemon(
        catalog, settings, model=ledger_model(), config=DaemonConfig(**{"poll_s": 0.1, "max_attempts": 1000, **config})
    )
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    await daemon.start()
    if mode.startswith("converse:"):
        await _converse(daemon, home, mode)
    if mode == "serve":
        await stop.wait()
    else:
        expect = int(mode.partition(":")[2] or 0) if mode.startswith("until:") else 0
        while not stop.is_set():
            if expect:
                if sum(1 for item in daemon.inbox.items() if item.state in TERMINAL) >= expect:
                    break
            elif not daemon.inbox.open_counts():
                break
            await asyncio.sleep(0.05)
    await daemon.stop()


async def _converse(daemon, home: str, mode: str) -> None:
    """`converse:AGENT:FIRST:LAST` (see the module docstring)."""
    from pathlib import Path

    _, agent, first, last = mode.split(":")
    Path(home).mkdir(parents=True, exist_ok=True)
    for number in range(int(first), int(last) + 1):
        item = await daemon.submit(agent, f"msg {number}")
        with (Path(home) / "accepted").open("a") as accepted:
            accepted.write(f"{number}\n")
        await daemon.wait(item.run_id, 60)


def zygote() -> None:
    """Import pagemind once, then fork a child per line of arguments on stdin; answer each exit code."""
    import pagemind.scheduler.daemon  # noqa: F401
    import tests.support.daemon_support  # noqa: F401
    from pagemind.runtime.tokens import encoding

    encoding()  # the token tables, parsed once for every child

    for line in sys.stdin:
        pid = os.fork()
        if pid == 0:
            try:
                child(*json.loads(line))
            finally:
                os._exit(70)
        _, status = os.waitpid(pid, 0)
        sys.stdout.write(f"{os.waitstatus_to_exitcode(status)}\n")
        sys.stdout.flush()


if __name__ == "__main__":
    if sys.argv[1:] == ["zygote"]:
        zygote()
    else:
        os.environ.setdefault("PAGEMIND_KILL_AT", sys.argv[5] if len(sys.argv) > 5 else "")
        child(*sys.argv[1:])
