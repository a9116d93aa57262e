"""The API's one error shape, `{"error": {"code", "message"}}`, and the status each daemon error answers with."""

from __future__ import annotations

from typing import Any

from starlette.exceptions import HTTPException

from pagemind.scheduler.errors import (
    AgentExists,
    AgentUnavailable,
    DaemonError,
    DaemonStopping,
    InvalidBlocks,
    KeyReused,
    NotDeletable,
    UnknownAgent,
    UnknownRun,
    UnknownTemplate,
)


class ApiError(HTTPException):
    """A failure a route reports to the client: an HTTP status, a stable machine-readable code and a message for
    people. (An HTTPException, so FastAPI lets it through when it is raised while a body is read.)"""

    def __init__(self, status: int, code: str, message: str, headers: dict[str, str] | None = None):
        super().__init__(status_code=status, detail=message, headers=headers)
        self.status, self.code, self.message = status, code, message


def unknown_run(run_id: str) -> ApiError:
    """The one 404 of a run that does not exist, or that the caller's key may not see."""
    return ApiError(404, "unknown_run", f"no run {run_id!r}")


def error_body(code: str, message: str) -> dict[str, Any]:
    """The JSON every error answers with; its message one line (several problems, as a spec's, joined by "; ")."""
    one_line = "; ".join(line.strip() for line in message.splitlines() if line.strip())
    return {"error": {"code": code, "message": one_line or message}}


# The status and code of each daemon error (subclasses first: the first match wins).
_DAEMON_ERRORS: tuple[tuple[type[DaemonError], int, str], ...] = (
    (AgentUnavailable, 503, "agent_unavailable"),  # its YAML fails to load; served again once fixed
    (UnknownAgent, 404, "unknown_agent"),
    (AgentExists, 409, "agent_exists"),
    (UnknownRun, 404, "unknown_run"),
    (KeyReused, 409, "idempotency_key_reused"),
    (NotDeletable, 409, "not_deletable"),
    (UnknownTemplate, 422, "unknown_template"),
    (InvalidBlocks, 422, "invalid_blocks"),
    (DaemonStopping, 503, "daemon_stopping"),  # the message is stored and pending: not a failure to resend
)


def headers_of_daemon_error(exc: DaemonError) -> dict[str, str] | None:
    """The headers an error answers with: where a stopped daemon's pending run is read, and when to come back."""
    if isinstance(exc, DaemonStopping):
        return {"location": f"/v1/runs/{exc.run_id}", "retry-after": "5"}
    return None


def status_of_daemon_error(exc: DaemonError) -> tuple[int, str]:
    """(HTTP status, code) for an error the daemon raised."""
    return next(
        ((status, code) for kind, status, code in _DAEMON_ERRORS if isinstance(exc, kind)), (400, "daemon_error")
    )
