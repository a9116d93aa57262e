"""The API's one error shape, `{"error": {"code", "message"}}`, and the status each daemon error answers with."""

from __future__ import annotations

from typing import Any

from starlette.exceptions import HTTPException

from pagemind.scheduler.errors import (AgentExists, DaemonError, KeyReused, NotDeletable, UnknownAgent, UnknownRun,
                                       UnknownTemplate)


class ApiError(HTTPException):
    """A failure a route reports to the client: an HTTP status, a stable machine-readable code and a message for
    people. (An HTTPException, so FastAPI lets it through when it is raised while a body is read.)"""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(status_code=status, detail=message)
        self.status, self.code, self.message = status, code, message


def error_body(code: str, message: str) -> dict[str, Any]:
    """The JSON every error answers with."""
    return {"error": {"code": code, "message": message}}


def status_of_daemon_error(exc: DaemonError) -> tuple[int, str]:
    """(HTTP status, code) for an error the daemon raised."""
    if isinstance(exc, UnknownAgent):
        return 404, "unknown_agent"
    if isinstance(exc, AgentExists):
        return 409, "agent_exists"
    if isinstance(exc, UnknownRun):
        return 404, "unknown_run"
    if isinstance(exc, KeyReused):
        return 409, "idempotency_key_reused"
    if isinstance(exc, NotDeletable):
        return 409, "not_deletable"
    if isinstance(exc, UnknownTemplate):
        return 422, "unknown_template"
    return 400, "daemon_error"
