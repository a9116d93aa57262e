"""The proxy's routes: `POST /v1/chat/completions` (a turn of the agent `model` names) and `GET /v1/models`."""

from __future__ import annotations

from typing import Any

import structlog
from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse, Response, StreamingResponse
from pydantic import ValidationError

from pagemind.scheduler.api.agents import DaemonDep
from pagemind.scheduler.api.auth import KeyRing, principal_in, turn_quota
from pagemind.scheduler.api.openai.agents import not_found, resolve
from pagemind.scheduler.api.openai.app_tools import app_tools, refuse_clashes
from pagemind.scheduler.api.openai.bodies import (
    COMPLETION_SCHEMA,
    ChatRequest,
    ModelList,
    ModelOut,
    completion,
    inlined,
)
from pagemind.scheduler.api.openai.chunks import calls_of, completion_chunks, failure, finish_reason
from pagemind.scheduler.api.openai.conversation import Incoming, incoming
from pagemind.scheduler.api.openai.errors import ProxyError
from pagemind.scheduler.daemon import Daemon
from pagemind.scheduler.errors import AgentUnavailable, UnknownAgent
from pagemind.scheduler.message_turn import AppTurn
from pagemind.scheduler.queue.inbox_item import APP_TURN, InboxItem

log = structlog.get_logger("pagemind.api")
router = APIRouter(prefix="/v1")
WAIT_S = 300.0  # how long a request waits for its turn (the openai SDK's own timeout is 600 s)
USER_HEADER = "x-pagemind-user"
# A failed or unfinished turn's message is stored: the SDK must not resend it as new (it retries 5xx otherwise).
NO_RETRY = {"x-should-retry": "false"}

RESPONSES: dict[int | str, dict[str, Any]] = {
    200: {
        "description": "the reply: a chat.completion, or (`stream: true`) chat.completion.chunk events",
        "content": {"application/json": {"schema": COMPLETION_SCHEMA}, "text/event-stream": {"schema": {}}},
    },
    400: {
        "description": "an invalid request, no new user message or tool result, a tool named as one of the agent's, "
        "`tool_choice` other than auto or none, `n` > 1"
    },
    403: {"description": "a user key naming another `user`"},
    404: {"description": "no agent or template of that name the key may use (model_not_found)"},
    409: {"description": "the Idempotency-Key was used for other content; the agent name is taken"},
    500: {"description": "the agent's turn failed (run_failed)"},
    503: {"description": "the agent's YAML does not load; the daemon is stopping"},
    504: {"description": "the turn is still running after the wait (resend the same request)"},
}


def parse(raw: bytes) -> ChatRequest:
    """The request body, or a 400 naming the first field at fault."""
    try:
        body = ChatRequest.model_validate_json(raw or b"null")
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        where = ".".join(str(p) for p in first["loc"]) or None
        raise ProxyError(400, "invalid_request", f"{where or 'body'}: {first['msg']}", param=where) from None
    if body.functions:
        raise ProxyError(400, "functions_unsupported", "send the app's functions as `tools`", param="functions")
    if body.n not in (None, 1):
        raise ProxyError(400, "n_unsupported", "one agent gives one reply: `n` must be 1", param="n")
    return body


@router.post(
    "/chat/completions",
    tags=["openai"],
    summary="OpenAI-compatible chat completions: a turn of an agent with memory",
    responses=RESPONSES,
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {"application/json": {"schema": inlined(ChatRequest.model_json_schema())}},
        }
    },
    dependencies=[Depends(turn_quota)],
)
async def chat_completions(request: Request, daemon: DaemonDep) -> Response:
    """The agent `model` names (`agent:NAME`, or `template:NAME` with the end user in `user` or X-Pagemind-User,
    made on first use) takes the request's new user message (scheduler/api/openai/conversation.py: the messages
    after its last assistant message; stored once, retries and resent histories included) and answers with its
    reply as the assistant's content, whole or (`stream: true`) as chunks. The app's own `tools` are offered to it
    beside its own; a call to one is the answer (`tool_calls`), and the app's `tool` results resume the turn
    (scheduler/api/openai/app_tools.py). Errors in OpenAI's shape."""
    body = parse(await request.body())
    keyring: KeyRing = request.app.state.keyring
    user = body.user or request.headers.get(USER_HEADER)
    new = incoming(body.messages, request.headers.get("idempotency-key"))  # refused before an agent is made
    tools, forced = app_tools(body.tools, body.tool_choice)
    name = await resolve(daemon, keyring, principal_in(request), body.model, user)
    try:
        item = await submit(daemon, name, new, tools, forced)
    except AgentUnavailable:
        raise  # its YAML does not load: the 503 that says so
    except UnknownAgent:
        raise not_found(body.model) from None
    headers = {"x-pagemind-agent": name, "x-pagemind-run-id": item.run_id}
    if new.ignored_system:
        headers["x-pagemind-ignored-system"] = str(new.ignored_system)
    log.info("proxy_turn", agent=name, run=item.run_id, keyed=new.key is not None, stream=body.stream)
    if body.stream:
        events = None if item.finished else daemon.events(item.run_id)
        return StreamingResponse(
            completion_chunks(item, events, daemon, body.model, WAIT_S),
            media_type="text/event-stream",
            headers={**headers, "cache-control": "no-cache"},
        )
    done = await daemon.wait(item.run_id, WAIT_S, known=item)
    failed = failure(done, item.run_id)
    if failed is not None:
        raise ProxyError(*failed, headers={**headers, **NO_RETRY})
    calls = calls_of(done)
    reply = (done.result or {}).get("reply") or (None if calls else "")
    answer = completion(item.run_id, item.created_at, body.model, reply, finish_reason(done), calls)
    return JSONResponse(answer, headers=headers)


async def submit(
    daemon: Daemon, name: str, new: Incoming, tools: list[dict[str, Any]], forced: str | None
) -> InboxItem:
    """The request's turn in the agent's inbox: a plain message, or (with the app's tools or results) an app turn
    (`scheduler.message_turn.AppTurn`); an app tool named as one of the agent's own is refused first."""
    if not tools and not new.results:
        return await daemon.submit(name, new.text, idempotency_key=new.key)
    if tools:
        refuse_clashes(tools, daemon.catalog.spec_for(name).resolved_tools())
    content = AppTurn(text=new.text, tools=tools, results=new.results, forced=forced).encoded()
    return await daemon.submit(name, content, idempotency_key=new.key, kind=APP_TURN)


@router.get("/models", tags=["openai"], summary="the agents and templates a key may name in `model`")
async def list_models(request: Request, daemon: DaemonDep) -> ModelList:
    """`agent:NAME` for every agent the key reaches (a user key: its user's), then `template:NAME` for every YAML
    of the agents folder (templates and agents: any makes a user's agent at its first request, as with
    `POST /v1/agents`)."""
    principal = principal_in(request)
    models = [
        ModelOut(
            id=f"agent:{a.name}",
            created=int(a.created_at.timestamp()) if a.created_at else 0,
            owned_by=a.owner or "pagemind",
        )
        for a in daemon.list_agents()
        if principal.admin or a.owner == principal.user
    ]
    models += [ModelOut(id=f"template:{t}", created=0, owned_by="pagemind") for t in daemon.catalog.folder.templates()]
    return ModelList(data=models)


@router.get(
    "/models/{model_id}",
    tags=["openai"],
    summary="one agent or template a key may name in `model`",
    responses={404: {"description": "no agent or template of that name the key may use (model_not_found)"}},
)
async def get_model(model_id: str, request: Request, daemon: DaemonDep) -> ModelOut:
    """`agent:NAME` or `template:NAME`, as `GET /v1/models` lists it; 404 `model_not_found` for anything else,
    another user's agent included."""
    found = [m for m in (await list_models(request, daemon)).data if m.id == model_id]
    if not found:
        raise not_found(model_id)
    return found[0]
