"""Routes: human review of what is remembered (`memory.review`, `runtime.memory.review`).

    GET    /v1/agents/{name}/memory/review                   -> ReviewList (what waits, oldest first)
    POST   /v1/agents/{name}/memory/review/{id}/approve      {"pin": false, "text": null} -> ReviewDecision
    POST   /v1/agents/{name}/memory/review/{id}/reject       -> ReviewDecision
    PATCH  /v1/agents/{name}/memory/review/{id}              {"text": "..."} -> PendingMemory
    POST   /v1/agents/{name}/memory/archival/{id}/pin        -> ReviewDecision (a remembered memory pinned)

Each works on the daemon's loaded agent with its turns held off; a user key reaches only its own agents.
"""

from __future__ import annotations

from typing import Any, Literal

import structlog
from fastapi import APIRouter
from pydantic import BaseModel, Field

from pagemind.runtime.memory.review import PendingMemory, ReviewQueue
from pagemind.runtime.spec.review import ORIGINS
from pagemind.scheduler.api.agents import DaemonDep
from pagemind.scheduler.api.errors import ApiError

log = structlog.get_logger("pagemind.api")
router = APIRouter(prefix="/v1/agents/{name}/memory", responses={404: {"description": "unknown agent or memory"}})


class ReviewList(BaseModel):
    """The memories of an agent waiting for review, and which writes wait (`memory.review`)."""

    agent: str
    required: list[str] = Field(description="the kinds of write held for review: extraction, reflection, …")
    pending: list[PendingMemory]


class ApproveIn(BaseModel):
    """How to approve a pending memory."""

    pin: bool = Field(False, description="pin it: never decayed, expired or superseded by reflection")
    text: str | None = Field(None, min_length=1, max_length=4000, description="its text as approved (an edit)")


class EditIn(BaseModel):
    """A pending memory's new text."""

    text: str = Field(min_length=1, max_length=4000)


class ReviewDecision(BaseModel):
    """What a decision did."""

    id: str = Field(description="the pending memory's id (the remembered one's, for a pin)")
    decision: Literal["approved", "rejected", "pinned"]
    memory_id: str | None = Field(None, description="the archival memory written or pinned")


def review_queue(agent: Any) -> ReviewQueue:
    """The agent's review queue; 404 `no_archival` when it has no archival memory to review into."""
    if agent.review_queue is None:
        raise ApiError(404, "no_archival", f"agent '{agent.name}' has no archival memory to review")
    queue: ReviewQueue = agent.review_queue
    return queue


def pending_memory(queue: ReviewQueue, review_id: str, name: str) -> PendingMemory:
    """The memory of that id waiting for review; 404 `unknown_review` when none waits."""
    item = next((p for p in queue.pending() if p.id == review_id), None)
    if item is None:
        raise ApiError(404, "unknown_review", f"agent '{name}' has no memory {review_id!r} waiting for review")
    return item


def review_list(agent: Any) -> ReviewList:
    """What waits for review on a loaded agent, and which writes wait (the API's list and the memory page's)."""
    queue = review_queue(agent)
    return ReviewList(agent=agent.name, required=[o for o in ORIGINS if queue.holds(o)], pending=queue.pending())


async def approve_pending(agent: Any, review_id: str, body: ApproveIn, via: str = "api") -> ReviewDecision:
    """Approve a pending memory of a loaded agent (held off its turns): written through the archival write path,
    with `body.text` as its edited text, pinned with `body.pin`. The API's route and the memory page's form."""
    queue = review_queue(agent)
    pending_memory(queue, review_id, agent.name)
    memory_id = await queue.approve(review_id, pin=body.pin, text=body.text)
    log.info("review_approved", agent=agent.name, pinned=body.pin, edited=body.text is not None, via=via)
    return ReviewDecision(id=review_id, decision="approved", memory_id=memory_id)


def reject_pending(agent: Any, review_id: str, via: str = "api") -> ReviewDecision:
    """Reject a pending memory of a loaded agent: dropped for good. The API's route and the memory page's form."""
    queue = review_queue(agent)
    pending_memory(queue, review_id, agent.name)
    queue.reject(review_id)
    log.info("review_rejected", agent=agent.name, via=via)
    return ReviewDecision(id=review_id, decision="rejected")


@router.get("/review", tags=["memory"], summary="memories waiting for review")
async def list_review(name: str, daemon: DaemonDep) -> ReviewList:
    """Held by `memory.review: required`: not searchable, not prefetched, until approved or rejected."""
    async with daemon.agent(name) as agent:
        return review_list(agent)


@router.post("/review/{review_id}/approve", tags=["memory"], summary="approve a pending memory")
async def approve(name: str, review_id: str, body: ApproveIn, daemon: DaemonDep) -> ReviewDecision:
    """Written through the archival write path (dedupe, supersede), pinned with `pin`."""
    async with daemon.agent(name) as agent:
        return await approve_pending(agent, review_id, body)


@router.post("/review/{review_id}/reject", tags=["memory"], summary="reject a pending memory")
async def reject(name: str, review_id: str, daemon: DaemonDep) -> ReviewDecision:
    """Dropped for good (no byte left: SQLite's secure delete)."""
    async with daemon.agent(name) as agent:
        return reject_pending(agent, review_id)


@router.patch("/review/{review_id}", tags=["memory"], summary="edit a pending memory")
async def edit(name: str, review_id: str, body: EditIn, daemon: DaemonDep) -> PendingMemory:
    """Its text changed before it is approved."""
    async with daemon.agent(name) as agent:
        queue = review_queue(agent)
        pending_memory(queue, review_id, name)
        queue.edit(review_id, body.text)
        return pending_memory(queue, review_id, name)


@router.post("/archival/{memory_id}/pin", tags=["memory"], summary="pin an archival memory")
async def pin(name: str, memory_id: str, daemon: DaemonDep) -> ReviewDecision:
    """Never decayed, expired or superseded by reflection from now on (the id in full)."""
    async with daemon.agent(name) as agent:
        archival: Any = agent.archival  # the runtime's own (`memory.wiring`): it resolves ids and pins
        if archival is None or archival.resolve_id(memory_id) != memory_id or not await archival.pin(memory_id):
            raise ApiError(404, "unknown_memory", f"agent '{name}' has no live archival memory {memory_id!r}")
    return ReviewDecision(id=memory_id, decision="pinned", memory_id=memory_id)
