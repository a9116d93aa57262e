"""Routes: an agent's memory (core blocks; archival list, search, insert, delete; recall search) and its context.

Each works on the daemon's loaded agent with its turns held off (`Daemon.agent`), so a read sees no step half
done and an edit never races a turn's compare-and-set.
"""

from __future__ import annotations

from typing import Annotated, Any

import structlog
from fastapi import APIRouter, Query, Response

from pagemind.scheduler.api.agents import DaemonDep
from pagemind.scheduler.api.errors import ApiError
from pagemind.scheduler.api.models import (
    ArchivalHitOut,
    ArchivalInsertIn,
    ArchivalList,
    ArchivalMemoryOut,
    BlockOut,
    ContextOut,
    MemoryOut,
    PatchBlock,
    RecallHitOut,
    UsageOut,
)

log = structlog.get_logger("pagemind.api")
router = APIRouter(prefix="/v1/agents/{name}", responses={404: {"description": "unknown agent"}})
Limit = Annotated[int, Query(ge=1, le=100)]
SearchText = Annotated[str, Query(min_length=1, max_length=2000, description="what to look for")]


def block_out(block: Any) -> BlockOut:
    """From a core-memory `Block`."""
    return BlockOut(
        label=block.label,
        value=block.value,
        chars=block.chars,
        limit=block.limit,
        description=block.description,
        read_only=block.read_only,
    )


@router.get("/memory", tags=["memory"], summary="core memory blocks")
async def get_memory(name: str, daemon: DaemonDep) -> MemoryOut:
    """The agent's core blocks in prompt order, with their sizes and limits."""
    async with daemon.agent(name) as agent:
        return MemoryOut(agent=agent.name, blocks=[block_out(b) for b in agent.memory.blocks])


@router.patch(
    "/memory/blocks/{label}",
    tags=["memory"],
    summary="set a core block's value",
    responses={
        404: {"description": "unknown agent or block"},
        409: {"description": "read-only block"},
        422: {"description": "over the block's limit, or not matching its schema"},
    },
)
async def patch_block(name: str, label: str, body: PatchBlock, daemon: DaemonDep) -> BlockOut:
    """Rewrite one block (recorded in its history as operation `api`); the block's limit holds, and a read-only
    block is changed in its YAML, not here."""
    async with daemon.agent(name) as agent:
        return block_out(await set_block(agent, label, body.value))


async def set_block(agent: Any, label: str, value: str, operation: str = "api") -> Any:
    """Rewrite one core block of a loaded agent (held off its turns: `Daemon.agent`) as a versioned edit of
    `operation` (`api`; the memory page's `ui`), and return the new `Block`: the edit path of this route and of
    the memory page (`api.ui`). Raises `ApiError` for an unknown (404) or read-only (409) block, and for a value
    over its limit or not matching its schema (422)."""
    from dataclasses import replace

    from pagemind.blocks import BlockEdit, BlockEditError, checked_json

    name = agent.name
    index = next((i for i, b in enumerate(agent.memory.blocks) if b.label == label), None)
    if index is None:
        raise ApiError(
            404,
            "unknown_block",
            f"agent '{name}' has no block '{label}'; blocks: {', '.join(agent.memory.labels()) or 'none'}",
        )
    old = agent.memory.blocks[index]
    if old.read_only:
        raise ApiError(409, "read_only", f"block '{label}' is read-only; change it in the agent's YAML")
    try:  # a structured block takes JSON matching its schema (stored compact)
        value = checked_json(label, old.schema, value) if old.schema is not None else value
    except BlockEditError as exc:
        raise ApiError(422, "schema", str(exc)) from None
    value = await agent.privacy.text(value)  # the agent's privacy policy holds for the API too (JSON stays JSON)
    if len(value) > old.limit:
        raise ApiError(
            422, "over_limit", f"block '{label}' holds at most {old.limit} characters; the value has {len(value)}"
        )
    edit = BlockEdit(label, operation, old.value, value, agent.clock())
    agent.store.commit_edits(agent.record.id, [edit], agent.window.block_versions)
    agent.memory.blocks[index] = replace(old, value=value)
    log.info("api_block_patched", agent=name, label=label, chars=len(value), operation=operation)
    return agent.memory.blocks[index]


def _archival(agent: Any) -> Any:
    if agent.archival is None:
        raise ApiError(
            404,
            "no_archival",
            f"agent '{agent.name}' has no archival memory (its spec lists no archival tool, or disables it)",
        )
    return agent.archival


@router.get("/memory/archival", tags=["memory"], summary="archival memories, newest first")
async def list_archival(
    name: str,
    daemon: DaemonDep,
    superseded: bool = False,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    offset: Annotated[int, Query(ge=0)] = 0,
) -> ArchivalList:
    """Live memories (and superseded ones with `superseded=true`), read from SQL."""
    async with daemon.agent(name) as agent:
        archival = _archival(agent)
        count, tags = archival.stats()
        memories = archival.list(include_superseded=superseded)[offset : offset + limit]
    return ArchivalList(
        count=count,
        tags=list(tags),
        memories=[
            ArchivalMemoryOut(
                id=m.id,
                text=m.text,
                kind=m.kind,
                tags=m.tags,
                importance=m.importance,
                created_at=m.created_at,
                hit_count=m.hit_count,
                superseded_by=m.superseded_by,
                expires_at=m.expires_at,
            )
            for m in memories
        ],
    )


@router.get("/memory/archival/search", tags=["memory"], summary="search archival memory")
async def search_archival(name: str, q: SearchText, daemon: DaemonDep, limit: Limit = 10) -> list[ArchivalHitOut]:
    """Ranked as the agent's own `archival_search` ranks (hit counts left alone: looking is not using)."""
    async with daemon.agent(name) as agent:
        hits = await _archival(agent).search(q, top_k=limit, count_hits=False)
    return list(hits)


@router.post("/memory/archival", tags=["memory"], status_code=201, summary="store an archival memory")
async def insert_archival(name: str, body: ArchivalInsertIn, daemon: DaemonDep) -> dict[str, Any]:
    """Through the agent's write path: a near-duplicate is refreshed, a contradicted memory superseded."""
    async with daemon.agent(name) as agent:
        try:
            content = await agent.privacy.text(body.content)  # the agent's privacy policy holds for the API too
            result = await _archival(agent).insert(content, kind=body.kind, tags=body.tags, importance=body.importance)
        except ValueError as exc:  # the write policy's refusal (blank, oversize …)
            raise ApiError(422, "refused", str(exc)) from None
    dumped: dict[str, Any] = result.model_dump()
    return dumped


@router.delete(
    "/memory/archival/{memory_id}",
    tags=["memory"],
    status_code=204,
    summary="delete an archival memory for good",
    responses={404: {"description": "unknown memory"}},
)
async def delete_archival(name: str, memory_id: str, daemon: DaemonDep) -> Response:
    """Deleted from the vector store and SQL, history included (the id in full)."""
    async with daemon.agent(name) as agent:
        archival = _archival(agent)
        if archival.resolve_id(memory_id) != memory_id:
            raise ApiError(404, "unknown_memory", f"agent '{name}' has no archival memory {memory_id!r}")
        await archival.forget(memory_id)
    log.info("api_archival_forgotten", agent=name, id=memory_id)
    return Response(status_code=204)


@router.get("/memory/recall/search", tags=["memory"], summary="search the conversation (recall memory)")
async def search_recall(
    name: str,
    daemon: DaemonDep,
    q: Annotated[str | None, Query(max_length=2000)] = None,
    roles: Annotated[list[str] | None, Query()] = None,
    limit: Limit = 10,
    page: Annotated[int, Query(ge=1)] = 1,
) -> list[RecallHitOut]:
    """Every stored message, evicted from the window or not, ranked for `q` (newest first without one)."""
    async with daemon.agent(name) as agent:
        assert agent.recall is not None  # a loaded agent always has recall memory (`memory.wiring`)
        hits = await agent.recall.search(q, roles=roles, limit=limit, page=page)
    return list(hits)


@router.get("/context", tags=["memory"], summary="the context window: tokens per section")
async def get_context(name: str, daemon: DaemonDep, messages: bool = False) -> ContextOut:
    """What `pagemind context --json` reports: tokens per section, the warn and flush lines, the pressure level
    (and the compiled messages with `messages=true`)."""
    from pagemind.runtime.cli.context_view import context_report

    async with daemon.agent(name) as agent:
        compiled = agent.compile()
        report = context_report(compiled, agent.spec, agent.window.correction)
    if messages:
        report["messages"] = compiled.messages
    return ContextOut(**report)


@router.get("/usage", tags=["memory"], summary="token use and prompt-cache hits, summed over the agent's steps")
async def get_usage(name: str, daemon: DaemonDep) -> UsageOut:
    """What the agent's steps cost: prompt, cached and completion tokens as the provider reported them, and the
    estimated dollars when the agent's YAML gives `model.prices` (what `pagemind context` prints)."""
    from pagemind.runtime.cli.context_view import usage_report

    async with daemon.agent(name) as agent:
        totals = await agent.store.usage(agent.record.id)
        prices = agent.spec.model.prices
    return UsageOut(agent=name, **usage_report(totals, prices))
