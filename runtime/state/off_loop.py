"""A turn's synchronous database work, run off the event loop that every agent of the process shares.

On Postgres such work waits on the network and the server: it runs in the loop's default executor, and like an
awaited statement (`state.async_pg.run_to_end`) once started it runs to its end even if the caller is cancelled
meanwhile, so a step is never committed without its caller seeing the result. On SQLite it runs inline: its
statements are in-process work that holds the GIL, so a worker thread only adds a hand-over and GIL contention
(measured at 100 agents: 0.64× main's steps/s in a thread, 1.04× inline; bench/RESULTS.md, "Daemon throughput,
main against this branch").
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy.engine import Engine

from pagemind.runtime.state.async_pg import run_to_end
from pagemind.runtime.state.dialects import dialect

T = TypeVar("T")


async def off_loop(engine: Engine, work: Callable[..., T], *args: Any) -> T:
    """`work(*args)` in a worker thread (SQLite: inline), awaited to its end."""
    if dialect(engine).runs_inline:
        return work(*args)
    loop = asyncio.get_running_loop()

    async def run() -> T:
        return await loop.run_in_executor(None, functools.partial(work, *args))

    return await run_to_end(run())
