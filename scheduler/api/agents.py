"""Routes: agents (list, get, create, delete), messages (sync, async, streamed as server-sent events), runs."""

from __future__ import annotations

from collections.abc import AsyncIterable
from typing import Annotated, Any

import structlog
from fastapi import APIRouter, Depends, Query, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from fastapi.sse import EventSourceResponse, ServerSentEvent
from pydantic import ValidationError

from pagemind.scheduler.api.auth import KeyRing, admin_only, principal_in, turn_quota
from pagemind.scheduler.api.errors import ApiError, unknown_run
from pagemind.scheduler.api.models import AgentList, AgentOut, AssignOwner, CreateAgent, PurgeOut, RunOut, SendMessage
from pagemind.scheduler.api.sse import accepted, turn_sse
from pagemind.scheduler.api.trigger_limit import too_frequent
from pagemind.scheduler.daemon import Daemon
from pagemind.scheduler.queue.inbox_item import InboxItem
from pagemind.scheduler.streams.run_stream import RunStream

log = structlog.get_logger("pagemind.api")
router = APIRouter(prefix="/v1")
YAML_TYPES = ("application/yaml", "application/x-yaml", "text/yaml", "text/x-yaml")


async def daemon_of(request: Request) -> Daemon:
    """The daemon the app serves (a dependency, so tests and routes share one way in). Async although it never
    waits: FastAPI runs a plain `def` dependency in its thread pool, a thread hop on every request."""
    daemon: Daemon = request.app.state.daemon
    return daemon


DaemonDep = Annotated[Daemon, Depends(daemon_of)]


def agent_out(info: Any) -> AgentOut:
    """From the daemon's `AgentInfo`."""
    return AgentOut(
        name=info.name, template=info.template, created_at=info.created_at, pending=info.pending, owner=info.owner
    )


def find_agent(daemon: Daemon, name: str) -> AgentOut:
    """One served agent, or 404."""
    return agent_out(daemon.agent_info(name))


# -- agents -------------------------------------------------------------------------------------------------------


@router.get("/agents", tags=["agents"], summary="every agent the daemon serves (a user key: that user's)")
async def list_agents(request: Request, daemon: DaemonDep) -> AgentList:
    """YAML agents, templates' agents and API-made agents, with how much work each has waiting; with a user key,
    the agents its user owns."""
    principal = principal_in(request)
    return AgentList(
        agents=[agent_out(a) for a in daemon.list_agents() if principal.admin or a.owner == principal.user]
    )


@router.get("/agents/{name}", tags=["agents"], summary="one agent", responses={404: {"description": "unknown agent"}})
async def get_agent(name: str, daemon: DaemonDep) -> AgentOut:
    """One agent the daemon serves."""
    return find_agent(daemon, name)


@router.post(
    "/agents",
    tags=["agents"],
    status_code=201,
    summary="create an agent from a template or a YAML body",
    responses={
        403: {"description": "`owner` given with a user key (its agents are its user's)"},
        409: {"description": "an agent of that name exists (any user's: names are shared by the whole daemon)"},
        422: {
            "description": "invalid body, unknown template, block values the template does not take, invalid YAML, "
            "or YAML that names code"
        },
    },
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": CreateAgent.model_json_schema()},  # inline: the body is read by hand
                "application/yaml": {"schema": {"type": "string", "description": "an agent YAML, as in agents/"}},
            },
        }
    },
)
async def create_agent(request: Request, daemon: DaemonDep) -> AgentOut:
    """`{"template", "name", "blocks"}` makes an agent with its own memory and the template's spec (a later
    change of the template reaches it); a YAML body (`Content-Type: application/yaml`) is a whole agent
    definition. A YAML agent may use the built-in tools only and the daemon's model endpoint and key: a
    `package.module:function` tool would run code named by the client, and a `base_url` or `api_key_env` would
    send a key the server holds wherever the client says. An agent made with a user key belongs to its user; an
    admin names its owner with `owner` (or later: `PUT /v1/agents/{name}/owner`)."""
    principal = principal_in(request)
    raw = await request.body()
    media = request.headers.get("content-type", "application/json").split(";")[0].strip().lower()
    if media in YAML_TYPES:
        spec = api_spec(raw)
        if (why := too_frequent(spec.schedule, daemon.config.min_api_trigger_s)) is not None:
            raise ApiError(422, "trigger_too_frequent", why)
        info = daemon.create_agent(spec.name, spec=spec, owner=principal.user)
    else:
        try:
            body = CreateAgent.model_validate_json(raw or b"null")
        except ValidationError as exc:
            raise RequestValidationError(exc.errors(include_url=False)) from None
        if body.owner is not None and not principal.admin and body.owner != principal.user:
            raise ApiError(403, "admin_only", "only an admin key gives an agent to another user (`owner`)")
        owner = principal.user if not principal.admin else body.owner
        info = daemon.create_agent(body.name, template=body.template, blocks=body.blocks or None, owner=owner)
    log.info("api_agent_created", agent=info.name, template=info.template, owner=info.owner)
    return agent_out(info)


def api_spec(raw: bytes) -> Any:
    """An agent definition posted as YAML, validated without importing anything it names; 422 when it is not
    one, or uses what only the served folder may (custom tools, its own endpoint or key)."""
    from pagemind.runtime.spec.agent import ModelSpec
    from pagemind.runtime.spec.loading import SpecError, parse_spec

    try:
        # A client's spec names no code (`runtime.spec.trust`: custom tools, schemas by module), imports nothing.
        spec = parse_spec(raw.decode("utf-8"), "<request body>", trust="client")
    except UnicodeDecodeError as exc:
        raise ApiError(422, "invalid_yaml", f"the body is not UTF-8 text (byte offset {exc.start})") from None
    except SpecError as exc:
        raise ApiError(422, "forbidden_field" if exc.refused else "invalid_yaml", str(exc)) from None
    default = ModelSpec(name="x")
    if spec.model.base_url is not None or spec.model.api_key_env != default.api_key_env:
        raise ApiError(
            422,
            "forbidden_field",
            "model.base_url / model.api_key_env: an agent posted to the API uses "
            "the daemon's endpoint and key; put an agent with its own in the served folder",
        )
    return spec


@router.delete(
    "/agents/{name}",
    tags=["agents"],
    status_code=204,
    summary="delete an agent, or purge it",
    responses={
        200: {"model": PurgeOut, "description": "purged (`purge=true`): what was erased, per store"},
        404: {"description": "unknown agent"},
        409: {"description": "an agent of the served folder (not_deletable): remove its file instead"},
        503: {"description": "a vector store cannot be reached (`purge=true`; nothing was erased)"},
    },
)
async def delete_agent(
    name: str,
    daemon: DaemonDep,
    purge: Annotated[bool, Query(description="erase every row, memory, vector point and trace of the agent")] = False,
) -> Response:
    """Without `purge`: the daemon stops serving an agent made through the API and its name is free again, but
    nothing of it is erased (its state is kept under the name `NAME.deleted-ID`). With `purge=true`: the agent is
    erased from every store (its messages, blocks and their history, archival memory and its vector points, the
    recall index, the embedding cache entries only its texts produced, its runs and their events, its traces),
    and the answer counts what was erased; a purge cut short is finished when the daemon starts next, and the agent
    is invisible from its start. A Postgres or Qdrant server keeps erased data until its own vacuum (docs:
    operations)."""
    if not purge:
        daemon.delete_agent(name)
        log.info("api_agent_deleted", agent=name)
        return Response(status_code=204)
    from pagemind.runtime.memory.vectors.records import StoreError

    try:
        report = await daemon.purge_agent(name)
    except StoreError as exc:
        raise ApiError(503, "store_unavailable", f"{exc} Nothing was purged.") from None
    log.info("api_agent_purged", agent=name, counts=report.counts)
    return JSONResponse(PurgeOut(name=name, counts=report.counts).model_dump(mode="json"))


@router.put(
    "/agents/{name}/owner",
    tags=["agents"],
    summary="give an agent to an end user (admin keys only)",
    responses={403: {"description": "a user key"}, 404: {"description": "unknown agent"}},
    openapi_extra=admin_only(),
)
async def assign_owner(name: str, body: AssignOwner, request: Request, daemon: DaemonDep) -> AgentOut:
    """From now on the user keys of `owner` reach the agent (and no other user's do); null: admin keys only.
    Memories it stores carry the owner as their `user_id` from its next load."""
    agent_id = daemon.catalog.agent_id(name)  # UnknownAgent; a YAML agent that never ran gets its row
    keyring: KeyRing = request.app.state.keyring
    keyring.keys.assign(agent_id, body.owner)
    daemon.pool.forget(name)  # loaded again at its next use, with its archival memory's user_id
    log.info("api_agent_assigned", agent=name, owner=body.owner)
    return find_agent(daemon, name)


# -- messages and runs --------------------------------------------------------------------------------------------


@router.post(
    "/agents/{name}/messages",
    tags=["messages"],
    summary="send a message",
    response_model=RunOut,  # the 200 answer (a 202 is a JSONResponse of the same model)
    responses={
        202: {"model": RunOut, "description": "accepted, not finished (async, or past timeout_s)"},
        404: {"description": "unknown agent"},
        409: {"description": "the idempotency key was used for other content (idempotency_key_reused)"},
        503: {
            "description": "the agent's YAML does not load (agent_unavailable), or the daemon stopped while the "
            "request waited (daemon_stopping: the message is stored and pending; Location names its run)"
        },
    },
    dependencies=[Depends(turn_quota)],
)
async def send_message(name: str, body: SendMessage, daemon: DaemonDep) -> RunOut | JSONResponse:
    """Commits the message to the agent's inbox, then (sync) waits up to `timeout_s` for the turn: 200 with the
    reply when it ended, 202 with the run to poll (`GET /v1/runs/{run_id}`) when it did not, or at once with
    `mode: async`. The same `idempotency_key` again returns the first run and runs nothing."""
    item = await daemon.submit(name, body.content, idempotency_key=body.idempotency_key)
    if body.mode == "sync":
        item = await daemon.wait(item.run_id, body.timeout_s, known=item)
    run = RunOut.of(item)
    if run.state in ("done", "failed"):
        return run
    return JSONResponse(
        run.model_dump(mode="json"),
        status_code=202,
        headers={"location": f"/v1/runs/{run.run_id}"},
    )


async def submitted(name: str, body: SendMessage, daemon: DaemonDep) -> tuple[InboxItem, RunStream | None]:
    """The stream's message, committed before the stream starts (so an unknown agent is a plain 404), and the
    run's event stream, subscribed at once."""
    item = await daemon.submit(name, body.content, idempotency_key=body.idempotency_key)
    return item, None if item.finished else daemon.events(item.run_id)  # a retried key's run may be over


@router.post(
    "/agents/{name}/messages/stream",
    tags=["messages"],
    response_class=EventSourceResponse,
    summary="send a message and stream its turn as server-sent events",
    responses={
        404: {"description": "unknown agent"},
        409: {"description": "the idempotency key was used for other content (idempotency_key_reused)"},
    },
    dependencies=[Depends(turn_quota)],
)
async def stream_message(
    body: SendMessage, started: Annotated[tuple[InboxItem, RunStream | None], Depends(submitted)], daemon: DaemonDep
) -> AsyncIterable[ServerSentEvent]:
    """`accepted` (the run id), then the turn as it happens — `turn_start`, `step_start`, `reply_delta` (the
    reply's text as the model writes it) and `reply_reset`, `tool_call`, `tool_result`, `memory_edit`,
    `step_end`, `runtime` — then `reply` (or `error`) and `done` with the run
    (scheduler/api/sse.py lists the events' data). Each event of the turn has `id: <seq>`: a client that loses
    the stream resumes it with `GET /v1/runs/{run_id}/events` and `Last-Event-ID`. A client that goes away does
    not stop the turn: it is in the inbox, and `GET /v1/runs/{run_id}` has its result."""
    item, events = started
    yield accepted(RunOut.of(item))
    async for sse in turn_sse(item, events, daemon, body.timeout_s):
        yield sse


@router.get(
    "/runs/{run_id}", tags=["runs"], summary="a run's state and result", responses={404: {"description": "unknown run"}}
)
async def get_run(run_id: str, daemon: DaemonDep) -> RunOut:
    """pending → running → done (with the reply) or failed (with the error)."""
    item = daemon.run(run_id)
    if item is None:
        raise unknown_run(run_id)
    return RunOut.of(item)


def resume_point(run_id: str, last_event_id: str | None) -> int:
    """The seq a resumed stream continues after: `Last-Event-ID` as the stream numbered it (a seq; the run id,
    which `accepted` carries, or none: from the start)."""
    if last_event_id is None or last_event_id.strip() in ("", run_id):
        return 0
    try:
        after = int(last_event_id.strip())
    except ValueError:
        after = -1
    if after < 0:
        raise ApiError(
            400, "bad_last_event_id", f"Last-Event-ID {last_event_id[:40]!r} is not an event id of this run's stream"
        )
    return after


async def watched(run_id: str, request: Request, daemon: DaemonDep) -> tuple[InboxItem, RunStream | None, int]:
    """The run (an unknown one is a plain 404 before the stream starts), its event stream, and where to resume."""
    after = resume_point(run_id, request.headers.get("last-event-id"))
    item = daemon.run(run_id)
    if item is None:
        raise unknown_run(run_id)
    if item.finished and daemon.relay is None:  # nothing of a finished run is kept but its row
        return item, None, after
    # From the first event, even when resuming: the mapper must see a step's model request to show its response.
    return item, daemon.events(run_id), after


@router.get(
    "/runs/{run_id}/events",
    tags=["runs"],
    response_class=EventSourceResponse,
    summary="a run's events as server-sent events, resumable with Last-Event-ID",
    responses={400: {"description": "a Last-Event-ID that is not a seq"}, 404: {"description": "unknown run"}},
)
async def run_events(
    watch: Annotated[tuple[InboxItem, RunStream | None, int], Depends(watched)],
    daemon: DaemonDep,
    timeout_s: Annotated[float, Query(gt=0, le=3600, description="stop streaming after")] = 600.0,
) -> AsyncIterable[ServerSentEvent]:
    """The events of the turn (as `POST /v1/agents/{name}/messages/stream` sends them, `id: <seq>` each; no
    `accepted`) after the `Last-Event-ID` header's seq (all of them without it), then `reply` (or `error`) and
    `done`, which carry no id (a client that reconnects after them gets them again).

    - a run in progress, in this daemon or (Postgres) in another: every event after the id, once, in order, as
      they happen, then the ending when the run ends (or `error` `not_finished` and `done` after `timeout_s`);
    - a run still pending: the same, from its first event;
    - a finished run: on SQLite (one process) only the ending — its events are not kept; on Postgres the events
      another daemon relayed while someone elsewhere watched the run (kept `events_keep_s`), else only the
      ending too. The ending always comes: the run's row has the reply or the error."""
    item, events, after = watch
    async for sse in turn_sse(item, events, daemon, timeout_s, after):
        yield sse
