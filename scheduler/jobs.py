"""Maintenance jobs the daemon runs for an agent from its inbox (`kind="job"`), by name.

A job runs in the agent's place in line, like a turn: after the items before it, with the agent's turn lock held,
so it never overlaps a turn. `compact` flushes the window now through the agent's pressure monitor (the idle
trigger's `run: compact`); `reflect` runs a reflection (`runtime.reflection`: consolidate archival memory, update the
profile). A job must be safe to run again: a daemon killed in the middle of one runs it again after restart.
"""

from __future__ import annotations

from typing import Any, Awaitable, Callable

import structlog

from pagemind.runtime.agent import Agent
from pagemind.runtime.budget import read_pressure
from pagemind.runtime.reflection.run import reflect as run_reflection

log = structlog.get_logger("pagemind.scheduler")

Job = Callable[[Agent], Awaitable[dict[str, Any]]]
JOBS: dict[str, Job] = {}


def register_job(name: str) -> Callable[[Job], Job]:
    """Register a job under `name` (a decorator); the last registration of a name wins."""

    def register(function: Job) -> Job:
        JOBS[name] = function
        return function

    return register


@register_job("compact")
async def compact(agent: Agent) -> dict[str, Any]:
    """Flush the window now, whatever the pressure: the oldest messages (at least half of the messages' tokens)
    leave the window into the summary and, when enabled, archival memory."""
    agent.refresh()
    before = len(agent.window.messages)
    reading = read_pressure(agent.compile().total_tokens, agent.window.correction, agent.spec)
    after = await agent.monitor.flush(0, reading, forced=True)
    evicted = before - len(agent.window.messages)
    return {"job": "compact", "evicted": evicted, "tokens_before": reading.tokens,
            "tokens_after": after.total_tokens if after is not None else reading.tokens}


@register_job("reflect")
async def reflect(agent: Agent) -> dict[str, Any]:
    """Reflect on what happened since the last reflection: merge, resolve contradictions, write insights, patch the
    profile, mark todos done (safe to rerun: a reflection cut short is finished from its stored plan)."""
    return await run_reflection(agent)


async def run_job(agent: Agent, name: str) -> dict[str, Any]:
    """Run job `name` for `agent` (the caller holds its turn lock); the job's result, or for a name no job has,
    `{"job": name, "error": "unknown job …"}` (the daemon marks such an item failed)."""
    job = JOBS.get(name)
    if job is None:
        return {"job": name, "error": f"unknown job '{name}' (known: {', '.join(sorted(JOBS))})"}
    result = await job(agent)
    log.info("job", agent=agent.name, job=name, **{k: v for k, v in result.items() if k != "job"})
    return result
