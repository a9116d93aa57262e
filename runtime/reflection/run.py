"""One reflection, start to end: `reflect(agent)`, what the `reflect` job, `pagemind reflect` and
`memory.reflection.every_turns` run.

    since the last reflection ─► gather ─► one bounded request ─► model (JSON-schema response format; rejected
    with HTTP 400: once more without) ─► parse + validate ─► plan stored ─► changes applied ─► done

A reflection left `applying` (a crash, or an error while applying) is finished first, from its stored plan, with
no new model call; every change is idempotent, so nothing is applied twice. A model failure, or an answer that is
not a valid plan, changes nothing: it is logged and recorded on the reflection's row.
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Any

import structlog

from pagemind.runtime.agent import DEFAULT_WAIT, Agent
from pagemind.runtime.memory.archival.memory import ArchivalService
from pagemind.runtime.model.client import ModelError, ModelRequest, ModelRequestRejected, ModelResponse
from pagemind.runtime.reflection.apply import apply_plan, validate
from pagemind.runtime.reflection.journal import DONE, FAILED, INVALID, Journal, ReflectionRow
from pagemind.runtime.reflection.request import Gathered, OverBudget, build_request, gather
from pagemind.runtime.reflection.schema import OutputError, ReflectionOutput, parse_output
from pagemind.runtime.tokens import DEFAULT_ENCODING

log = structlog.get_logger("pagemind.reflection")


def _journal(agent: Agent) -> Journal:
    return Journal(agent.store.engine, agent.record.id)


async def reflect(agent: Agent) -> dict[str, Any]:
    """Reflect on what happened since the last reflection (the caller holds the agent's turn lock, as a daemon job
    does; `reflect_now` takes it). Returns a small dict for the log: status and counts of changes."""
    config = agent.spec.memory.reflection
    archival = agent.archival if isinstance(agent.archival, ArchivalService) else None
    if not config.enabled or archival is None:
        reason = "disabled" if not config.enabled else "no archival memory"
        return {"job": "reflect", "status": "skipped", "reason": reason}
    journal = _journal(agent)
    unfinished = journal.unfinished()
    if unfinished is not None:
        return await _resume(agent, archival, journal, unfinished)
    since = journal.last_done()
    gathered = await gather(agent, archival, since, config)
    if not gathered.messages:
        log.info("reflection_nothing_new", agent=agent.name, after=since.last_message_id if since else 0)
        return {"job": "reflect", "status": "skipped", "reason": "nothing new since the last reflection"}
    reflection_id = str(uuid.uuid4())
    journal.start(reflection_id, gathered.now, gathered.last_message_id)
    result = {"job": "reflect", "reflection_id": reflection_id}
    try:
        output = await _plan(agent, archival, gathered, reflection_id)
    except (OverBudget, ModelError) as exc:
        log.warning("reflection_failed", agent=agent.name, reflection_id=reflection_id, error=str(exc)[:500])
        journal.finish(reflection_id, FAILED, agent.clock(), error=str(exc)[:2000])
        return result | {"status": FAILED, "error": str(exc)[:300]}
    except OutputError as exc:
        log.warning("reflection_invalid", agent=agent.name, reflection_id=reflection_id, error=str(exc)[:500])
        journal.finish(reflection_id, INVALID, agent.clock(), error=str(exc)[:2000])
        return result | {"status": INVALID, "error": str(exc)[:300]}
    journal.plan(reflection_id, output.model_dump(mode="json"))
    return result | await _apply(agent, archival, journal, reflection_id, output)


async def _plan(agent: Agent, archival: ArchivalService, gathered: Gathered, reflection_id: str) -> ReflectionOutput:
    """Ask the model for a plan and check it; raises OverBudget, ModelError or OutputError."""
    config = agent.spec.memory.reflection
    model = config.model or agent.spec.memory.summarizer_model or agent.spec.model.name
    built = build_request(gathered, model, config, agent.spec.model.encoding or DEFAULT_ENCODING)
    log.info(
        "reflection_request",
        agent=agent.name,
        reflection_id=reflection_id,
        tokens=built.tokens,
        messages=len(built.message_ids),
        memories=len(built.memories),
        dropped_messages=built.dropped_messages,
        dropped_memories=built.dropped_memories,
    )
    output = parse_output((await _ask(agent, built.request)).content)
    validate(output, built.memories, agent, config.profile_block, archival.config.max_memory_chars)
    return output


async def _resume(agent: Agent, archival: ArchivalService, journal: Journal, row: ReflectionRow) -> dict[str, Any]:
    """Finish a reflection left applying, from its stored plan."""
    log.warning("reflection_resumed", agent=agent.name, reflection_id=row.id)
    output = ReflectionOutput.model_validate(row.plan or {})
    return {"job": "reflect", "reflection_id": row.id, "resumed": True} | await _apply(
        agent, archival, journal, row.id, output
    )


async def _apply(
    agent: Agent, archival: ArchivalService, journal: Journal, reflection_id: str, output: ReflectionOutput
) -> dict[str, Any]:
    try:
        counts = await apply_plan(agent, archival, reflection_id, output, agent.spec.memory.reflection.profile_block)
    except Exception as exc:  # left applying: the next reflection finishes it from the same plan
        journal.note_error(reflection_id, f"{type(exc).__name__}: {exc}"[:2000])
        log.exception("reflection_apply_interrupted", agent=agent.name, reflection_id=reflection_id)
        raise
    journal.finish(reflection_id, DONE, agent.clock(), counts=counts)
    log.info("reflection_done", agent=agent.name, reflection_id=reflection_id, **counts)
    return {"status": DONE, "changes": counts}


def _names_response_format(error: ModelRequestRejected) -> bool:
    text = str(error).lower()
    return "response_format" in text or "json_schema" in text


async def _ask(agent: Agent, request: ModelRequest) -> ModelResponse:
    """The model's answer through the agent (observers and traces see the call); a provider that rejects the
    response format (HTTP 400 naming it) is asked once more without it, and the JSON is found in the text."""
    try:
        return await agent.call_model(request, 0)
    except ModelRequestRejected as exc:
        if request.response_format is None or not _names_response_format(exc):
            raise
        log.warning("reflection_response_format_rejected", agent=agent.name, error=str(exc)[:300])
        return await agent.call_model(dataclasses.replace(request, response_format=None), 0)


def due_reflection(agent: Agent) -> str | None:
    """Whether `memory.reflection.every_turns` asks for a reflection now — at least that many user messages since
    the newest reflection (of any outcome, so a failing one is not retried after every turn) — as a key naming it
    (the same until a reflection runs: a queued job is not queued twice), or None."""
    config = agent.spec.memory.reflection
    if not config.enabled or config.every_turns == 0 or not isinstance(agent.archival, ArchivalService):
        return None
    newest = _journal(agent).newest()
    messages = agent.store.messages_after(agent.record.id, newest.last_message_id if newest else 0)
    if sum(m.role == "user" for m in messages) < config.every_turns:
        return None
    return f"reflect:after:{newest.id if newest else 'start'}"


async def reflect_now(agent: Agent, wait: float = DEFAULT_WAIT) -> dict[str, Any]:
    """`reflect` with the agent's turn lock held (waiting up to `wait` seconds for a turn elsewhere: AgentBusy),
    after reading again what another process changed: for callers outside the daemon (the CLI)."""
    async with agent.store.turn_lock(agent.record.id, wait, agent.name):
        await agent.refresh()
        return await reflect(agent)


async def reflect_if_due(agent: Agent, wait: float = DEFAULT_WAIT) -> dict[str, Any] | None:
    """`reflect_now` when `due_reflection`, else None: for the CLI after a turn, whose reply is already shown, so
    a failure is logged, not raised (a reflection cut short is finished by the next one)."""
    if due_reflection(agent) is None:
        return None
    try:
        return await reflect_now(agent, wait)
    except Exception as exc:
        log.exception("reflection_after_turn_failed", agent=agent.name)
        return {"job": "reflect", "status": FAILED, "error": str(exc)[:300]}
