"""The process the episode crash tests kill (tests/runtime/memory/lifecycle/test_episodes.py), forked from a forkserver.

Nothing of pagemind is imported at the top: `runtime.process.crashpoints` reads PAGEMIND_KILL_AT once, when first
imported, so the child sets it before importing anything that calls a crash point.
"""

from __future__ import annotations

import asyncio
import os
from datetime import timedelta
from pathlib import Path


def child(home: str, database_url: str, point: str, mode: str) -> None:
    """Run the session-end job twice (the episode, then its fading a week later), or only open the store, with the
    crash point armed; exit 0 only if it never fired."""
    os.environ["PAGEMIND_KILL_AT"] = point
    from pagemind.runtime.memory.vectors.edge import EdgeBackend
    from pagemind.runtime.process.logs import configure_logging
    from pagemind.runtime.testing.clock import ManualClock
    from pagemind.runtime.testing.embedder import FakeEmbedder
    from pagemind.runtime.testing.models import by_purpose
    from tests.runtime.memory.lifecycle.test_episodes import T0, crash_scenario, load_agent, no_steps, summarizer

    configure_logging("ERROR")
    backend = EdgeBackend(Path(home) / "shard", FakeEmbedder.dim)
    clock = ManualClock(T0 + timedelta(hours=1))
    respond = by_purpose(no_steps, summarize=summarizer)
    agent = asyncio.run(load_agent(database_url, Path(home), clock, backend, respond))
    if mode == "scenario":
        asyncio.run(crash_scenario(agent, clock))
    else:
        assert agent.archival.store is not None  # opening reconciles
    os._exit(0)
