"""The proxy's errors in OpenAI's shape, `{"error": {"message", "type", "param", "code"}}`, which the openai SDK
turns into its typed exceptions (`BadRequestError`, `AuthenticationError`, `NotFoundError` …) by status.

Every failure on the proxy's paths answers in this shape, those raised before a route runs included (auth, the
request's size, the per-key rate: `api.app` asks `is_proxy_path`); `code` is the daemon's own stable code
(`unknown_agent`, `too_many_turns` …), `type` OpenAI's class of error for the status.
"""

from __future__ import annotations

from typing import Any

from pagemind.scheduler.api.errors import ApiError

PROXY_PATHS = frozenset(("/v1/chat/completions", "/v1/models"))
_TYPES = {401: "authentication_error", 403: "permission_error", 429: "rate_limit_error"}

ERROR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "description": "The proxy's errors, in OpenAI's shape (scheduler/api/openai/errors.py)",
    "required": ["error"],
    "properties": {
        "error": {
            "type": "object",
            "required": ["message", "type", "param", "code"],
            "properties": {
                "message": {"type": "string"},
                "type": {"type": "string", "description": "invalid_request_error, authentication_error, …"},
                "param": {"type": ["string", "null"], "description": "the request's field at fault, if one is"},
                "code": {"type": "string", "description": "the daemon's stable code, e.g. model_not_found"},
            },
        }
    },
}


def is_proxy_path(path: str) -> bool:
    """Whether a request's path is the proxy's (its errors answer in OpenAI's shape)."""
    return path in PROXY_PATHS or path.startswith("/v1/models/")


def error_type(status: int) -> str:
    """OpenAI's `type` of an error with this HTTP status."""
    return _TYPES.get(status, "server_error" if status >= 500 else "invalid_request_error")


def openai_error_body(status: int, code: str, message: str, param: str | None = None) -> dict[str, Any]:
    """The JSON of one error; its message one line."""
    one_line = "; ".join(line.strip() for line in message.splitlines() if line.strip()) or message
    return {"error": {"message": one_line, "type": error_type(status), "param": param, "code": code}}


class ProxyError(ApiError):
    """A failure of a proxy route: `ApiError` with the request's field at fault (`param`)."""

    def __init__(
        self, status: int, code: str, message: str, param: str | None = None, headers: dict[str, str] | None = None
    ):
        super().__init__(status, code, message, headers)
        self.param = param
