"""The daemon's HTTP API: `create_app(daemon, token)` builds the FastAPI application `pagemind serve` runs.

The routes live by area in `api_agents` (agents, messages, runs, the event stream) and `api_memory` (memory,
context); their bodies in `api_models`. This module holds what every route shares:

- **auth**: with a token every request but `/health` and `/ready` (probes) needs `Authorization: Bearer TOKEN`,
  else 401; without one the server is reachable from this machine only (`scheduler.cli` refuses to bind
  elsewhere), so there is nothing to check;
- **request size**: a body over `max_body` bytes is refused with 413 before the route runs, whether it says its
  length or streams it (a chunked body is counted as it arrives);
- **errors**: every failure answers `{"error": {"code", "message"}}` — validation 422, unknown agent 404, an agent
  that exists 409, too large 413 — never a bare string or an HTML page.

Both checks are pure ASGI middleware: Starlette's `BaseHTTPMiddleware` would buffer the event stream.
"""

from __future__ import annotations

import secrets
from typing import Any

import structlog
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pagemind.scheduler.api.errors import ApiError, error_body, status_of_daemon_error
from pagemind.scheduler.daemon import Daemon
from pagemind.scheduler.errors import DaemonError

log = structlog.get_logger("pagemind.api")

MAX_BODY = 1024 * 1024  # bytes; a message is text, and a YAML agent a page or two
OPEN_PATHS = frozenset({"/health", "/ready"})  # load balancers probe these without credentials


def create_app(daemon: Daemon, token: str | None = None, *, max_body: int = MAX_BODY) -> FastAPI:
    """The API over a started `daemon`. `token` None: no auth (the caller binds to loopback only)."""
    from pagemind.scheduler.api import agents as api_agents
    from pagemind.scheduler.api import memory as api_memory

    app = FastAPI(
        title="pagemind",
        version="1",
        description="Agents with memory, served by a pagemind daemon.",
        responses={
            401: {"description": "missing or wrong bearer token"},
            413: {"description": "request body too large"},
        },
    )
    app.state.daemon = daemon
    app.include_router(api_agents.router)
    app.include_router(api_memory.router)
    _add_health(app)
    _add_error_handlers(app)
    app.add_middleware(Guard, token=token, max_body=max_body)
    return app


def _add_health(app: FastAPI) -> None:
    @app.get("/health", tags=["health"], summary="the process answers")
    async def health() -> dict[str, str]:
        """Liveness: the event loop runs."""
        return {"status": "ok"}

    @app.get("/ready", tags=["health"], summary="the daemon takes work")
    async def ready(request: Request) -> JSONResponse:
        """Readiness: the daemon is started and not stopping (503 while it drains, so a balancer moves on)."""
        daemon = request.app.state.daemon
        if not daemon.started:
            return JSONResponse(
                error_body("not_ready", "the daemon is not running (starting, or stopping)"), status_code=503
            )
        broken = {str(path): why for path, why in daemon.catalog.errors.items()}
        return JSONResponse({"status": "ready", "agents_folder_errors": broken})


def _add_error_handlers(app: FastAPI) -> None:
    @app.exception_handler(ApiError)
    async def api_error(_: Request, exc: ApiError) -> JSONResponse:
        return JSONResponse(error_body(exc.code, exc.message), status_code=exc.status)

    @app.exception_handler(DaemonError)
    async def daemon_error(_: Request, exc: DaemonError) -> JSONResponse:
        status, code = status_of_daemon_error(exc)
        return JSONResponse(error_body(code, str(exc)), status_code=status)

    @app.exception_handler(RequestValidationError)
    async def invalid(_: Request, exc: RequestValidationError) -> JSONResponse:
        problems = [f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()]
        body = error_body("invalid_request", "; ".join(problems) or "invalid request")
        body["error"]["details"] = [{"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in exc.errors()]
        return JSONResponse(body, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(_: Request, exc: StarletteHTTPException) -> JSONResponse:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, f"http_{exc.status_code}")
        return JSONResponse(error_body(code, str(exc.detail)), status_code=exc.status_code, headers=exc.headers)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.error("api_unexpected_error", path=request.url.path, error=type(exc).__name__, exc_info=exc)
        return JSONResponse(
            error_body("internal", f"unexpected {type(exc).__name__}; see the daemon's log"), status_code=500
        )


class Guard:
    """Bearer-token auth and the request size limit, in front of every route (pure ASGI: streams pass through)."""

    def __init__(self, app: ASGIApp, *, token: str | None, max_body: int):
        self.app, self.token, self.max_body = app, token, max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        if self.token is not None and scope["path"] not in OPEN_PATHS and not self._authorized(headers, self.token):
            await _answer(
                send,
                401,
                error_body(
                    "unauthorized", "missing or wrong bearer token (send `Authorization: Bearer $PAGEMIND_API_TOKEN`)"
                ),
                {"www-authenticate": "Bearer"},
            )
            return
        length = headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > self.max_body:
            await _answer(send, 413, _too_large(self.max_body))
            return
        await self.app(scope, self._counting(receive, send), send)

    def _authorized(self, headers: dict[str, str], token: str) -> bool:
        scheme, _, given = headers.get("authorization", "").partition(" ")
        return scheme.lower() == "bearer" and secrets.compare_digest(given.strip().encode(), token.encode())

    def _counting(self, receive: Receive, send: Send) -> Receive:
        """`receive` that refuses a body growing past the limit (one sent in chunks, without a length)."""
        seen = 0
        limit = self.max_body

        async def counted() -> Message:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise ApiError(413, "too_large", _too_large(limit)["error"]["message"])
            return message

        return counted


def _too_large(limit: int) -> dict[str, Any]:
    return error_body("too_large", f"request body over {limit:,} bytes")


async def _answer(send: Send, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
    import json

    raw = json.dumps(body).encode()
    head = [(b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode())]
    head += [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": raw})
