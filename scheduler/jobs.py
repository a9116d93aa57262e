"""Maintenance jobs the daemon runs for an agent from its inbox (`kind="job"`), by name.

A job runs in the agent's place in line, like a turn: after the items before it, with the agent's turn lock held,
so it never overlaps a turn. `compact` flushes the window now through the agent's pressure monitor; `reflect` runs
a reflection (`runtime.reflection`: consolidate archival memory, update the profile). A job an idle trigger fired
ends the session first (`runtime.session_end`: episodes, ephemeral blocks), so `idle: {after: 15m, run: reflect}`
is the whole session end. A job must be safe to run again: a daemon killed in the middle of one runs it again
after restart.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import structlog

from pagemind.runtime.agent import Agent
from pagemind.runtime.budget import read_pressure
from pagemind.runtime.reflection.run import reflect as run_reflection
from pagemind.runtime.session_end import close_session

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
    await agent.refresh()
    before = len(agent.window.messages)
    reading = read_pressure(agent.compile().total_tokens, agent.window.correction, agent.spec)
    after = await agent.monitor.flush(0, reading, forced=True)
    evicted = before - len(agent.window.messages)
    return {
        "job": "compact",
        "evicted": evicted,
        "tokens_before": reading.tokens,
        "tokens_after": after.total_tokens if after is not None else reading.tokens,
    }


@register_job("reflect")
async def reflect(agent: Agent) -> dict[str, Any]:
    """Reflect on what happened since the last reflection: merge, resolve contradictions, write insights, patch the
    profile, mark todos done (safe to rerun: a reflection cut short is finished from its stored plan)."""
    return await run_reflection(agent)


async def run_job(agent: Agent, name: str, *, ends_session: bool = False) -> dict[str, Any]:
    """Run job `name` for `agent` (the caller holds its turn lock); the job's result, or for a name no job has,
    `{"job": name, "error": "unknown job …"}` (the daemon marks such an item failed). With `ends_session` (an idle
    trigger fired it: the agent fell quiet) the session ends first (`runtime.session_end`: episodes, ephemeral
    blocks), and the result holds that under `session`."""
    job = JOBS.get(name)
    if job is None:
        return {"job": name, "error": f"unknown job '{name}' (known: {', '.join(sorted(JOBS))})"}
    session = await close_session(agent, reflect_after=False) if ends_session else None
    result = await job(agent)
    if session is not None:
        errors = [e for e in (session.get("error"), result.get("error")) if e]
        result = result | {"session": session} | ({"error": "; ".join(errors)} if errors else {})
    log.info("job", agent=agent.name, job=name, **{k: v for k, v in result.items() if k != "job"})
    return result
