"""The daemon's HTTP API: `create_app(daemon, token)` builds the FastAPI application `pagemind serve` runs.

The routes live by area in `api_agents` (agents, messages, runs, the event stream) and `api_memory` (memory,
context); their bodies in `api_models`. This module holds what every route shares:

- **auth**: with a token or any API key in the database, every request but the probes (`/health`, `/ready`, and
  the same under `/v1`) and the docs page (`/docs` and the OpenAPI document it loads) needs `Authorization:
  Bearer TOKEN-OR-KEY`, else 401; the document declares the bearer scheme, so the page's "Authorize" button sends
  it with its calls. `PAGEMIND_API_TOKEN` and keys of scope admin reach everything; a user key reaches its user's
  agents only (`api.auth`: ownership, the 404 that says nothing, limits). With neither token nor key the server is
  reachable from this machine only (`scheduler.cli` refuses to bind elsewhere), so there is nothing to check.
  The memory page (`/ui`, `api.ui`) takes the same key from its login cookie as well, and sends a page request
  without a working one to its login form (303) rather than answering 401. Readiness without an admin
  credential counts the agent files that do not load; what is wrong with them (paths, YAML) is shown only with one;
- **request size**: a body over `max_body` bytes is refused with 413 before the route runs, whether it says its
  length or streams it (a chunked body is counted as it arrives);
- **errors**: every failure answers `{"error": {"code", "message"}}` — validation 422, unknown agent 404, an agent
  that exists 409, too large 413, too many requests 429, an agent whose YAML does not load 503 — never a bare
  string or an HTML page; on the memory page, whose errors are pages, a page; on the OpenAI-compatible proxy's paths
  (`api.openai`) in OpenAI's shape instead, `{"error": {"message", "type", "param", "code"}}`, with 400 for what is
  invalid.

Both checks are pure ASGI middleware: Starlette's `BaseHTTPMiddleware` would buffer the event stream.
"""

from __future__ import annotations

from typing import Any

import structlog
from fastapi import Depends, FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, Response
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from pagemind.runtime.state.keys import KeyStore
from pagemind.scheduler.api.auth import KeyRing, RateLimiter, authorize
from pagemind.scheduler.api.errors import ApiError, error_body, headers_of_daemon_error, status_of_daemon_error
from pagemind.scheduler.api.openai.errors import ERROR_SCHEMA as OPENAI_ERROR_SCHEMA
from pagemind.scheduler.api.openai.errors import ProxyError, is_proxy_path, openai_error_body
from pagemind.scheduler.api.ui import session as ui_session
from pagemind.scheduler.daemon import Daemon
from pagemind.scheduler.errors import DaemonError

log = structlog.get_logger("pagemind.api")

MAX_BODY = 1024 * 1024  # bytes; a message is text, and a YAML agent a page or two
PROBES = ("/health", "/ready", "/v1/health", "/v1/ready")  # load balancers probe these without credentials
# The docs pages and what they load: a browser opening them cannot send a token (their API calls still need one).
DOCS_URL, OAUTH2_REDIRECT_URL, REDOC_URL, OPENAPI_URL = "/docs", "/docs/oauth2-redirect", "/redoc", "/openapi.json"
OPEN_PATHS = frozenset((*PROBES, DOCS_URL, OAUTH2_REDIRECT_URL, REDOC_URL, OPENAPI_URL))
BEARER = "bearer"  # the security scheme's name in the OpenAPI document
UNAUTHORIZED = error_body(
    "unauthorized",
    "missing, wrong or revoked bearer token (send `Authorization: Bearer $PAGEMIND_API_TOKEN` or an API key)",
)


class _Api(FastAPI):
    """FastAPI whose OpenAPI document declares the bearer token (checked by `Guard`, not by a dependency per route,
    which would cost every request), so the docs page offers "Authorize"; the open routes need none."""

    def openapi(self) -> dict[str, Any]:
        """The document, built once, with the bearer scheme required everywhere but on `OPEN_PATHS`."""
        if self.openapi_schema is None:
            document = super().openapi()
            document.setdefault("components", {})["securitySchemes"] = {
                BEARER: {
                    "type": "http",
                    "scheme": "bearer",
                    "description": "PAGEMIND_API_TOKEN (an admin: every agent) or an API key from `pagemind keys "
                    "create` (scope admin: every agent; scope user: only that user's agents, anything else answers "
                    "404 as an unknown agent or run would; routes marked x-admin-only answer 403). Needed when the "
                    "daemon has a token or any key; per user key: key_requests_per_minute and key_turns_in_flight "
                    "(429 with Retry-After)",
                }
            }
            document["security"] = [{BEARER: []}]
            for path in OPEN_PATHS.intersection(document.get("paths", {})):
                for operation in document["paths"][path].values():
                    operation["security"] = []
            document_errors(document)
            self.openapi_schema = document
        return self.openapi_schema


def create_app(
    daemon: Daemon, token: str | None = None, *, max_body: int = MAX_BODY, keyring: KeyRing | None = None
) -> FastAPI:
    """The API over a started `daemon`. Auth is required when there is a `token` or any live key in the database
    (else none: the caller binds to loopback only); `keyring` replaces the one made here (tests: its clock)."""
    from pagemind.scheduler.api import agents as api_agents
    from pagemind.scheduler.api import keys as api_keys
    from pagemind.scheduler.api import memory as api_memory
    from pagemind.scheduler.api import porting as api_porting
    from pagemind.scheduler.api import users as api_users
    from pagemind.scheduler.api.mcp import McpEndpoint
    from pagemind.scheduler.api.openai import routes as api_openai
    from pagemind.scheduler.api.privacy import forgetting as api_forgetting
    from pagemind.scheduler.api.privacy import review as api_review
    from pagemind.scheduler.api.ui import routes as ui_routes

    if keyring is None:
        keys = KeyStore(daemon.store.engine)
        required = token is not None or keys.any_live()
        keyring = KeyRing(keys, token, required=required, cache_s=daemon.config.key_cache_s)

    app = _Api(
        title="pagemind",
        version="1",
        description="Agents with memory, served by a pagemind daemon.",
        docs_url=DOCS_URL,
        swagger_ui_oauth2_redirect_url=OAUTH2_REDIRECT_URL,
        redoc_url=REDOC_URL,
        openapi_url=OPENAPI_URL,
        responses={
            401: {"description": "missing, wrong or revoked bearer token or key"},
            413: {"description": "request body too large"},
            429: {"description": "this key's requests per minute or turns in flight are used up; see Retry-After"},
        },
        dependencies=[Depends(authorize)],  # every route, those added later too: the owner of what its path names
    )
    app.state.daemon = daemon
    app.state.keyring = keyring
    app.include_router(api_agents.router)
    app.include_router(api_memory.router)
    app.include_router(api_forgetting.router)
    app.include_router(api_review.router)
    app.include_router(api_keys.router)
    app.include_router(api_users.router)
    app.include_router(ui_routes.router)  # the memory page, /ui (left out of the OpenAPI document)
    app.mount("/mcp", McpEndpoint(daemon, keyring))  # an agent's memory over MCP: /mcp/AGENT (`api.mcp`)
    app.include_router(api_porting.router)
    app.include_router(api_openai.router)
    _add_health(app)
    _add_error_handlers(app)
    limiter = RateLimiter(daemon.config.key_requests_per_minute, keyring.clock)
    app.add_middleware(Guard, keyring=keyring, limiter=limiter, max_body=max_body)
    return app


ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "Every error's body (scheduler/api/errors.py); a 422 adds `details`, one per problem",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["code", "message"],
            "properties": {
                "code": {"type": "string", "description": "stable and machine-readable, e.g. unknown_agent"},
                "message": {"type": "string", "description": "for people: what is wrong and what to do"},
                "details": {"type": "array", "items": {"type": "object"}},
            },
        }
    },
}


def document_errors(document: dict[str, Any]) -> None:
    """Every error answer of the document (4xx, 5xx) has the one body the API sends, `Error` (`OpenAIError` on the
    proxy's paths): FastAPI documents its own 422 shape (`HTTPValidationError`, `{"detail": …}`), which the API
    never sends, and leaves the others without a body. Every route naming an agent lists the 503 of an agent whose
    YAML does not load."""
    ours = {"application/json": {"schema": {"$ref": "#/components/schemas/Error"}}}
    openai_shape = {"application/json": {"schema": {"$ref": "#/components/schemas/OpenAIError"}}}
    for path, methods in document.get("paths", {}).items():
        body = openai_shape if is_proxy_path(path) else ours  # the proxy answers in OpenAI's shape
        for operation in methods.values():
            if "{name}" in path:  # the agent's YAML in the served folder does not load (`AgentUnavailable`)
                operation["responses"].setdefault("503", {"description": "the agent's YAML does not load"})
            for status, response in operation.get("responses", {}).items():
                if status[0] in "45":
                    response["content"] = body
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    schemas.pop("HTTPValidationError", None)
    schemas.pop("ValidationError", None)
    schemas["Error"] = ERROR_SCHEMA
    schemas["OpenAIError"] = OPENAI_ERROR_SCHEMA


def _add_health(app: FastAPI) -> None:
    async def health() -> dict[str, str]:
        """Liveness: the event loop runs."""
        return {"status": "ok"}

    async def ready(request: Request) -> JSONResponse:
        """Readiness: the daemon is started and not stopping (503 while it drains, so a balancer moves on), and
        how many files of the agents folder do not load; what is wrong with them only with an admin credential (or
        when the daemon needs none), as a file's YAML and paths are no business of an anonymous prober."""
        daemon = request.app.state.daemon
        if not daemon.started:
            return JSONResponse(
                error_body("not_ready", "the daemon is not running (starting, or stopping)"), status_code=503
            )
        errors = daemon.catalog.folder.errors
        body: dict[str, Any] = {"status": "ready", "agents_folder_error_count": len(errors)}
        principal = await request.app.state.keyring.principal(request.headers.get("authorization", ""))
        if principal is not None and principal.admin:
            body["agents_folder_errors"] = {str(path): why for path, why in errors.items()}
        return JSONResponse(body)

    for prefix in ("", "/v1"):  # the root for probes configured before /v1; /v1 as every other route
        app.get(f"{prefix}/health", tags=["health"], summary="the process answers")(health)
        app.get(
            f"{prefix}/ready",
            tags=["health"],
            summary="the daemon takes work",
            responses={503: {"description": "not running: starting, or stopping (not_ready)"}},
        )(ready)


def shaped_error(path: str, status: int, code: str, message: str, param: str | None = None) -> dict[str, Any]:
    """An error's body for a request to `path`: OpenAI's shape on the proxy's paths, the API's own elsewhere."""
    return openai_error_body(status, code, message, param) if is_proxy_path(path) else error_body(code, message)


def _add_error_handlers(app: FastAPI) -> None:
    from pagemind.scheduler.api.ui.pages import error_page  # the memory page's errors are pages (Jinja2)

    @app.exception_handler(ApiError)
    async def api_error(request: Request, exc: ApiError) -> Response:
        if ui_session.is_ui(request.url.path):
            return error_page(request, exc.status, exc.code, exc.message)
        param = exc.param if isinstance(exc, ProxyError) else None
        body = shaped_error(request.url.path, exc.status, exc.code, exc.message, param)
        return JSONResponse(body, status_code=exc.status, headers=exc.headers)

    @app.exception_handler(DaemonError)
    async def daemon_error(request: Request, exc: DaemonError) -> Response:
        status, code = status_of_daemon_error(exc)
        if ui_session.is_ui(request.url.path):  # an unknown agent, another user's: the same page
            return error_page(request, status, code, str(exc))
        body = shaped_error(request.url.path, status, code, str(exc))
        return JSONResponse(body, status_code=status, headers=headers_of_daemon_error(exc))

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> Response:
        problems = [f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()]
        if ui_session.is_ui(request.url.path):
            return error_page(request, 422, "invalid_request", "; ".join(problems) or "invalid request")
        if is_proxy_path(request.url.path):  # OpenAI answers what is invalid with 400
            return JSONResponse(openai_error_body(400, "invalid_request", "; ".join(problems)), status_code=400)
        body = error_body("invalid_request", "; ".join(problems) or "invalid request")
        body["error"]["details"] = [{"loc": list(e["loc"]), "msg": e["msg"], "type": e["type"]} for e in exc.errors()]
        return JSONResponse(body, status_code=422)

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> Response:
        code = {404: "not_found", 405: "method_not_allowed"}.get(exc.status_code, f"http_{exc.status_code}")
        if ui_session.is_ui(request.url.path):
            return error_page(request, exc.status_code, code, str(exc.detail))
        body = shaped_error(request.url.path, exc.status_code, code, str(exc.detail))
        return JSONResponse(body, status_code=exc.status_code, headers=exc.headers)

    @app.exception_handler(Exception)
    async def unexpected(request: Request, exc: Exception) -> JSONResponse:
        log.error("api_unexpected_error", path=request.url.path, error=type(exc).__name__, exc_info=exc)
        message = f"unexpected {type(exc).__name__}; see the daemon's log"
        return JSONResponse(shaped_error(request.url.path, 500, "internal", message), status_code=500)


class Guard:
    """Auth (`api.auth.KeyRing`), the per-key request rate and the request size limit, in front of every route
    (pure ASGI: streams pass through). The principal found goes to the route in `scope["state"]`."""

    def __init__(self, app: ASGIApp, *, keyring: KeyRing, limiter: RateLimiter, max_body: int):
        self.app, self.keyring, self.limiter, self.max_body = app, keyring, limiter, max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        path, page = scope["path"], ui_session.is_ui(scope["path"])
        if path not in OPEN_PATHS and not (page and ui_session.is_open(path)):
            # the memory page's requests may present the key as its login cookie
            credential = ui_session.credential(headers) if page else headers.get("authorization", "")
            principal = await self.keyring.principal(credential)
            if principal is None and page:
                await _answer_redirect(send, ui_session.LOGIN)
                return
            if principal is None:
                message = UNAUTHORIZED["error"]["message"]
                body = shaped_error(path, 401, "unauthorized", message)
                await _answer(send, 401, body, {"www-authenticate": "Bearer"})
                return
            wait = 0 if principal.admin else self.limiter.wait_s(principal.key_id)
            if wait:
                message = "too many requests with this key; retry after the seconds Retry-After says"
                await _answer(send, 429, shaped_error(path, 429, "rate_limited", message), {"retry-after": str(wait)})
                return
            scope.setdefault("state", {})["principal"] = principal
        length = headers.get("content-length")
        if length is not None and length.isdigit() and int(length) > self.max_body:
            too_large = _too_large(self.max_body)["error"]["message"]
            await _answer(send, 413, shaped_error(path, 413, "too_large", too_large))
            return
        await self.app(scope, self._counting(receive, send), send)

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


async def _answer_redirect(send: Send, location: str) -> None:
    """A page request without a key that works: to the login form."""
    head = [(b"location", location.encode()), (b"content-length", b"0"), (b"cache-control", b"no-store")]
    await send({"type": "http.response.start", "status": 303, "headers": head})
    await send({"type": "http.response.body", "body": b""})


def _too_large(limit: int) -> dict[str, Any]:
    return error_body("too_large", f"request body over {limit:,} bytes")


async def _answer(send: Send, status: int, body: dict[str, Any], headers: dict[str, str] | None = None) -> None:
    import json

    raw = json.dumps(body).encode()
    head = [(b"content-type", b"application/json"), (b"content-length", str(len(raw)).encode())]
    head += [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
    await send({"type": "http.response.start", "status": status, "headers": head})
    await send({"type": "http.response.body", "body": raw})
