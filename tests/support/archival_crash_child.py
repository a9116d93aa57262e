"""The process the archival crash suite kills (tests/crash/test_archival_crash.py), forked from a forkserver.

Nothing of pagemind is imported at the top: `runtime.process.crashpoints` reads PAGEMIND_KILL_AT once, when first
imported, so the child sets it before importing anything that calls a crash point (the forkserver has imported
only third-party libraries).
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

HEAVY = [
    "sqlalchemy",
    "sqlmodel",
    "qdrant_edge",
    "numpy",
    "pydantic",
    "structlog",
    "psycopg",
    "alembic",
    "py_rust_stemmers",
    "httpx",
    "tiktoken",
]


def child(home: str, database_url: str, point: str, mode: str) -> None:
    """Run the scenario (or only open the store) with the crash point armed; exit 0 only if it never fired."""
    os.environ["PAGEMIND_KILL_AT"] = point
    from pagemind.runtime.memory.vectors.edge import EdgeBackend
    from pagemind.runtime.process.logs import configure_logging
    from tests.crash.test_archival_crash import DIM, make_service, scenario

    configure_logging("ERROR")
    if mode == "switch":  # the embedding model changed: its own store, re-embedded one memory per batch
        from pagemind.runtime.memory.archival import reembed

        reembed.BATCH = 1
        service = make_service(EdgeBackend(Path(home) / "shard-new", DIM), database_url, new_model=True)
        assert service.store is not None
        os._exit(0)
    backend = EdgeBackend(Path(home) / "shard", DIM)
    service = make_service(backend, database_url)
    with open(Path(home) / "acks.log", "a") as log:

        def ack(kind: str, memory_id: str) -> None:
            log.write(f"{kind} {memory_id}\n")
            log.flush()  # in the kernel before the next write: SIGKILL keeps it

        if mode == "scenario":
            asyncio.run(scenario(service, ack))
        else:
            assert service.store is not None  # opening reconciles
    os._exit(0)
