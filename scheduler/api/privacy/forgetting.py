"""Routes: forget by request and muted topics (`runtime.forgetting`, `runtime.memory.topics`).

    POST   /v1/agents/{name}/memory/forget      {"query": "home address"}  -> ForgetReport
    GET    /v1/agents/{name}/memory/muted                                  -> MutedTopicsOut
    POST   /v1/agents/{name}/memory/muted       {"topic": "my ex Mark"}    -> MutedTopicsOut
    DELETE /v1/agents/{name}/memory/muted?topic=my%20ex%20Mark             -> MutedTopicsOut

Each works on the daemon's loaded agent with its turns held off (`Daemon.agent`); a user key reaches only its own
agents (the app's `authorize`, on every route that names an agent).
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

import structlog
from fastapi import APIRouter, Query
from pydantic import BaseModel, Field

from pagemind.runtime.forgetting.report import ForgetReport
from pagemind.runtime.memory.topics import FORGET_SIMILARITY, MAX_TOPIC_CHARS
from pagemind.scheduler.api.agents import DaemonDep
from pagemind.scheduler.api.errors import ApiError

log = structlog.get_logger("pagemind.api")
router = APIRouter(prefix="/v1/agents/{name}/memory", responses={404: {"description": "unknown agent"}})


class ForgetIn(BaseModel):
    """What to forget."""

    query: str = Field(min_length=1, max_length=500, description="the words to forget (keywords, or meaning)")
    min_similarity: float = Field(
        FORGET_SIMILARITY, ge=0, le=1, description="the cosine at which a text matches the query by meaning"
    )


class TopicIn(BaseModel):
    """A topic to mute."""

    topic: str = Field(min_length=1, max_length=MAX_TOPIC_CHARS, description="the topic, in a few words")


class MutedTopicsOut(BaseModel):
    """An agent's muted topics, oldest first."""

    agent: str
    topics: list[str]
    changed: bool | None = Field(None, description="whether the request changed the list (None for a read)")


async def forget_in(agent: Any, body: ForgetIn, via: str = "api") -> ForgetReport:
    """Forget what `body.query` matches in every tier of a loaded agent (held off its turns): the API's route and
    the memory page's form. 422 `refused` for a query the forget refuses."""
    from pagemind.runtime.forgetting.forget import forget_everywhere

    try:
        report = await forget_everywhere(agent, body.query, agent.home, min_similarity=body.min_similarity)
    except ValueError as exc:
        raise ApiError(422, "refused", str(exc)) from None
    log.info("forgotten_by_request", agent=agent.name, removed=report.total, via=via)
    return report


def change_topics(agent: Any, change: Literal["mute", "unmute"] | None = None, topic: str = "") -> MutedTopicsOut:
    """A loaded agent's muted topics, after muting or unmuting `topic` (`change`): the API's routes and the memory
    page's forms. 404 `no_memory` for an agent that keeps no memory, 422 `refused` for a refused topic."""
    mutes = agent.forgetting.mutes
    if mutes is None:
        raise ApiError(404, "no_memory", f"agent '{agent.name}' keeps no memory a topic could be muted in")
    try:
        changed = None if change is None else mutes.mute(topic) if change == "mute" else mutes.unmute(topic)
    except ValueError as exc:
        raise ApiError(422, "refused", str(exc)) from None
    return MutedTopicsOut(agent=agent.name, topics=mutes.topics(), changed=changed)


@router.post("/forget", tags=["memory"], summary="forget what a query matches, everywhere")
async def forget(name: str, body: ForgetIn, daemon: DaemonDep) -> ForgetReport:
    """Archival memories, core lines, summaries, episodes and messages (tombstoned) that match, and the agent's
    traces rewritten; the report counts what was removed and never repeats it."""
    async with daemon.agent(name) as agent:
        return await forget_in(agent, body)


async def _topics(
    name: str, daemon: DaemonDep, change: Literal["mute", "unmute"] | None = None, topic: str = ""
) -> MutedTopicsOut:
    async with daemon.agent(name) as agent:
        return change_topics(agent, change, topic)


@router.get("/muted", tags=["memory"], summary="muted topics")
async def list_muted(name: str, daemon: DaemonDep) -> MutedTopicsOut:
    """The topics the agent leaves out of prefetch, search results, extraction and reflection."""
    return await _topics(name, daemon)


@router.post("/muted", tags=["memory"], summary="mute a topic")
async def mute(name: str, body: TopicIn, daemon: DaemonDep) -> MutedTopicsOut:
    """Mute a topic until it is unmuted (`changed` false: it was muted already)."""
    return await _topics(name, daemon, "mute", body.topic)


@router.delete("/muted", tags=["memory"], summary="unmute a topic")
async def unmute(
    name: str, daemon: DaemonDep, topic: Annotated[str, Query(min_length=1, max_length=MAX_TOPIC_CHARS)]
) -> MutedTopicsOut:
    """Unmute a topic, as written, case aside (`changed` false: it was not muted)."""
    return await _topics(name, daemon, "unmute", topic)
