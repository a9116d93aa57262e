"""The end of a session: what happens when an agent falls quiet (the daemon's idle trigger, `pagemind reflect
--end-session`).

In order: the session becomes an `episode` memory and old episodes fade (`memory.episodes`), ephemeral blocks
go back to their seeds, then the agent reflects (`memory.reflection`). Each step is safe to run twice, so a daemon
killed mid-way simply runs the whole sequence again. A step that fails is logged and reported; the later steps
still run, because each stands on its own (an episode the summarizer could not write is retried next time and
must not keep the session's working notes alive, nor stop the reflection).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from pagemind.runtime.agent import Agent
from pagemind.runtime.ephemeral import clear_ephemeral
from pagemind.runtime.memory.episodes import end_session as make_episodes
from pagemind.runtime.reflection.run import reflect

log = structlog.get_logger("pagemind.session_end")

Step = Callable[[Agent], Awaitable[dict[str, Any]]]
STEPS: tuple[tuple[str, Step], ...] = (
    ("episodes", make_episodes),
    ("ephemeral", clear_ephemeral),
    ("reflection", reflect),
)


async def close_session(agent: Agent, *, reflect_after: bool = True) -> dict[str, Any]:
    """End the agent's session (the caller holds its turn lock): episodes, ephemeral blocks, and, unless
    `reflect_after` is False, a reflection. Returns each step's result by name, and `error` naming the steps that
    failed (the daemon marks such a job failed; the steps that worked stay done)."""
    results: dict[str, Any] = {}
    failed: list[str] = []
    for name, step in STEPS:
        if name == "reflection" and not reflect_after:
            continue
        try:
            results[name] = await step(agent)
        except Exception as exc:
            log.exception("session_end_step_failed", agent=agent.name, step=name)
            results[name] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
        if "error" in results[name]:
            failed.append(f"{name}: {results[name]['error']}")
    log.info("session_end", agent=agent.name, steps=list(results), failed=len(failed))
    return results | ({"error": "; ".join(failed)} if failed else {})
