"""A small client of the daemon's HTTP API, for the CLI (`pagemind send`, `agents --server`, `run` through a
daemon) and for scripts: plain httpx, the bearer token from the caller or `PAGEMIND_API_TOKEN`."""

from __future__ import annotations

import os
from typing import Any

import httpx


class ClientError(RuntimeError):
    """The server refused or could not be reached; `status` is the HTTP status (0: no answer), `code` the API's
    error code."""

    def __init__(self, message: str, status: int = 0, code: str = ""):
        super().__init__(message)
        self.status, self.code = status, code


class DaemonClient:
    """One daemon's API at `url` (e.g. `http://127.0.0.1:8283`)."""

    def __init__(self, url: str, token: str | None = None, *, timeout: float = 30.0,
                 transport: httpx.BaseTransport | None = None):
        token = token if token is not None else os.environ.get("PAGEMIND_API_TOKEN") or None
        headers = {"authorization": f"Bearer {token}"} if token else {}
        self.url = url.rstrip("/")
        self.http = httpx.Client(base_url=self.url, headers=headers, timeout=timeout, transport=transport)

    def close(self) -> None:
        """Close the connection pool."""
        self.http.close()

    def __enter__(self) -> "DaemonClient":
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def request(self, method: str, path: str, *, timeout: float | None = None, **kwargs: Any) -> Any:
        """The decoded JSON answer (None for 204); a ClientError with the API's message for an error."""
        try:
            response = self.http.request(method, path, timeout=timeout or self.http.timeout, **kwargs)
        except httpx.HTTPError as exc:
            raise ClientError(f"no answer from {self.url}: {type(exc).__name__}: {exc}") from None
        if response.status_code >= 400:
            try:
                error = response.json()["error"]
                message, code = error["message"], error["code"]
            except (ValueError, KeyError, TypeError):
                message, code = response.text[:300] or response.reason_phrase, ""
            raise ClientError(f"{self.url} answered {response.status_code}: {message}", response.status_code, code)
        return None if response.status_code == 204 else response.json()

    def send(self, agent: str, content: str, *, idempotency_key: str | None = None,
             timeout_s: float = 300.0) -> dict[str, Any]:
        """Send a message and wait up to `timeout_s` for the turn; the run (state `done` with the reply, `failed`
        with the error, or still `pending`/`running` past the timeout)."""
        body = {"content": content, "mode": "sync", "timeout_s": timeout_s}
        if idempotency_key:
            body["idempotency_key"] = idempotency_key
        return self.request("POST", f"/v1/agents/{agent}/messages", json=body, timeout=timeout_s + 30)

    def agents(self) -> list[dict[str, Any]]:
        """The agents the daemon serves."""
        return self.request("GET", "/v1/agents")["agents"]

    def has_agent(self, name: str) -> bool:
        """Whether the daemon serves an agent of this name."""
        try:
            self.request("GET", f"/v1/agents/{name}")
        except ClientError as exc:
            if exc.status == 404:
                return False
            raise
        return True
