"""Routes: export an agent with all of its memory, import one (a `pagemind export` file or a Letta agent file).

- `GET /v1/agents/{name}/export?format=jsonl|af&redact=true`: the agent as `pagemind.agent` JSON Lines (streamed,
  one record a line, `application/x-ndjson`) or as a Letta agent file (`application/json`). Read with the agent's
  turns held off, so the file never holds half a step. A user key exports only its user's agents (`auth.authorize`).
  `redact=true`: personal data replaced by typed placeholders, in either format (`runtime.porting.redaction`).
- `POST /v1/agents/import?as=NEW_NAME&replace=true`: the body is the file, either format (told apart by content).
  The agents it makes belong to the key's user; a name that is taken answers 409 unless `as` gives another or
  `replace` purges the agent there first (one made through the daemon, and the caller's own). A file imported
  through the API is a client's: it may name no code (custom tools, schemas by module) and no model endpoint or
  key of its own, as for `POST /v1/agents`; what did not map is in each agent's `notes`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Annotated, Any, Literal

import structlog
from fastapi import APIRouter, Query, Request
from fastapi.responses import JSONResponse, StreamingResponse
from pydantic import BaseModel, Field

from pagemind.scheduler.api.agents import DaemonDep
from pagemind.scheduler.api.auth import principal_in
from pagemind.scheduler.api.errors import ApiError
from pagemind.scheduler.errors import AgentExists, UnknownAgent

log = structlog.get_logger("pagemind.api")
router = APIRouter(prefix="/v1/agents")
MEDIA = {"jsonl": "application/x-ndjson", "af": "application/json"}


class ImportedAgent(BaseModel):
    """One agent an import made."""

    name: str
    counts: dict[str, int] = Field(description="records imported, by type (message, block, archival_memory, …)")
    reembedded: int = Field(description="archival memories embedded by this server's embedding model")
    replaced: bool = Field(description="an agent of the same name was purged first")
    notes: list[str] = Field(description="what did not map as it was (unknown tools, renamed blocks, …)")


class ImportOut(BaseModel):
    """What an import made."""

    format: Literal["jsonl", "af"]
    agents: list[ImportedAgent]


@router.get(
    "/{name}/export",
    tags=["agents"],
    summary="export an agent with all of its memory",
    responses={
        200: {
            "description": "the file: JSON Lines (`format=jsonl`) or a Letta agent file (`format=af`)",
            "content": {MEDIA["jsonl"]: {}, MEDIA["af"]: {}},
        },
        404: {"description": "unknown agent"},
    },
)
async def export_agent(
    name: str,
    daemon: DaemonDep,
    format: Annotated[Literal["jsonl", "af"], Query(description="jsonl (all of its memory) or af (Letta)")] = "jsonl",
    redact: Annotated[bool, Query(description="personal data replaced by typed placeholders ([phone#1])")] = False,
) -> StreamingResponse:
    """The agent's spec, core blocks and their versions, messages, summaries, archival memories and their versions,
    episodes, triggers' state (`jsonl`); or its blocks, messages and tools as a Letta agent file (`af`)."""
    from pagemind.runtime.porting.files import export_lines

    async with daemon.agent(name):  # turns held off: the file holds whole steps
        pieces = await asyncio.to_thread(lambda: list(export_lines(daemon.catalog.store, name, format, redact=redact)))

    async def stream() -> AsyncIterator[bytes]:
        for piece in pieces:
            yield piece.encode("utf-8")

    suffix = "af" if format == "af" else "jsonl"
    headers = {"content-disposition": f'attachment; filename="{name}.{suffix}"'}
    log.info("api_agent_exported", agent=name, format=format, redacted=redact)
    return StreamingResponse(stream(), media_type=MEDIA[format], headers=headers)


@router.post(
    "/import",
    tags=["agents"],
    status_code=201,
    summary="import an agent from a file (pagemind export or Letta .af)",
    response_model=ImportOut,
    responses={
        409: {"description": "the name is taken (agent_exists), or `replace` names a folder agent (not_deletable)"},
        422: {"description": "not a file of either format, or an agent that names code or its own endpoint"},
    },
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                MEDIA["jsonl"]: {"schema": {"type": "string", "description": "a `pagemind export` file"}},
                MEDIA["af"]: {"schema": {"type": "object", "description": "a Letta agent file"}},
            },
        }
    },
)
async def import_agent(
    request: Request,
    daemon: DaemonDep,
    as_name: Annotated[str | None, Query(alias="as", description="the new agent's name (a file of one agent)")] = None,
    replace: Annotated[bool, Query(description="purge the agent of that name first (made by the API)")] = False,
) -> JSONResponse:
    """Import every agent of the file; 201 with what each became and what did not map."""
    from pagemind.runtime.porting.files import import_file, read_file
    from pagemind.runtime.porting.load import ImportRefused, NameTaken
    from pagemind.runtime.porting.records import FormatError

    principal = principal_in(request)
    purged: set[str] = set()
    data = await request.body()
    try:
        loaded = await asyncio.to_thread(read_file, data)
    except FormatError as exc:
        raise ApiError(422, "invalid_file", str(exc)) from None
    for bundle, _ in loaded.agents:
        _client_rules(bundle)
        target = as_name or bundle.name
        if daemon.catalog.folder.is_yaml_agent(target) or target in daemon.catalog.folder.templates():
            raise AgentExists(target)
        if replace and await _purge_own(daemon, request, target):
            purged.add(target)
    try:
        reports = await asyncio.to_thread(
            import_file, daemon.catalog.store, daemon.settings, data, name=as_name, code="none", owner=principal.user
        )
    except NameTaken:
        raise AgentExists(as_name or loaded.agents[0][0].name) from None
    except (FormatError, ImportRefused) as exc:
        raise ApiError(422, "invalid_file", str(exc)) from None
    agents = [
        ImportedAgent(name=r.name, counts=r.counts, reembedded=r.reembedded, replaced=r.name in purged, notes=r.notes)
        for r in reports
    ]
    log.info("api_agents_imported", agents=[a.name for a in agents], owner=principal.user)
    body = ImportOut(format=loaded.format, agents=agents)
    return JSONResponse(body.model_dump(mode="json"), status_code=201)


def _client_rules(bundle: Any) -> None:
    """422 for a spec that names its own model endpoint or key (a client's spec uses the daemon's, as for
    `POST /v1/agents`); code is refused by the import's own validation (`trust: client`)."""
    model = bundle.agent.get("spec", {}).get("model") or {}
    if model.get("base_url") or model.get("api_key_env") not in (None, "OPENAI_API_KEY"):
        raise ApiError(
            422,
            "forbidden_field",
            "model.base_url / model.api_key_env: an agent imported through the API uses the daemon's endpoint and "
            "key; import it with `pagemind import` on the server instead",
        )


async def _purge_own(daemon: Any, request: Request, name: str) -> bool:
    """Purge the agent `name` for a replacing import, when the caller may reach it; whether there was one."""
    ring = request.app.state.keyring
    principal = principal_in(request)
    if daemon.catalog.store.get_agent(name) is None:
        return False
    if not principal.admin and await ring.keys.owner_awaited(name) != principal.user:
        raise AgentExists(name)  # another user's: taken, as creating it would say
    try:
        await daemon.purge_agent(name)
    except UnknownAgent:  # stored, but not one the daemon serves: the import then finds the name taken
        return False
    return True
