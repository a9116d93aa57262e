"""The garbage collector's settings for a long-running daemon.

A serving daemon holds a few hundred thousand long-lived objects (the modules of FastAPI, SQLAlchemy, pydantic and
the SDK, the agents' loaded state) and allocates many short-lived ones per step (rows, JSON, requests). With
CPython's defaults every full collection walks all of the long-lived ones: measured on `pagemind serve` at 100
agents (bench/daemon_throughput.py), collections took ~14 % of the daemon's CPU, half of it in full collections
of ~280,000 objects. So, once the server listens: what exists then is moved out of the collector's sight
(`gc.freeze`: it was all made at start and lives until exit), and the youngest generation is collected after
`YOUNG_THRESHOLD` allocations instead of 700, so that fewer of a step's temporaries, alive at an unlucky moment,
are promoted to be walked again in the older generations. Reference cycles are still collected.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 10_000


def tune_for_serving() -> None:
    """Freeze what exists now and collect the young generation less often (see the module docstring)."""
    gc.collect()
    gc.freeze()
    _, older, oldest = gc.get_threshold()
    gc.set_threshold(YOUNG_THRESHOLD, older, oldest)
