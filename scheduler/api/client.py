"""A small client of the daemon's HTTP API, for the CLI (`pagemind send`, `agents --server`, `run` through a
daemon) and for scripts: plain httpx, the bearer token from the caller or `PAGEMIND_API_TOKEN`."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx

from pagemind.runtime.process.settings import Settings


class ClientError(RuntimeError):
    """The server refused or could not be reached; `status` is the HTTP status (0: no answer), `code` the API's
    error code."""

    def __init__(self, message: str, status: int = 0, code: str = ""):
        super().__init__(message)
        self.status, self.code = status, code


class DaemonClient:
    """One daemon's API at `url` (e.g. `http://127.0.0.1:8283`)."""

    def __init__(
        self,
        url: str,
        token: str | None = None,
        *,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
        async_transport: httpx.AsyncBaseTransport | None = None,
    ):
        token = token if token is not None else Settings.read("api_token")
        self.headers = {"authorization": f"Bearer {token}"} if token else {}
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.async_transport = async_transport  # for `stream_send` (tests: an ASGI app in the same event loop)
        self.http = httpx.Client(base_url=self.url, headers=self.headers, timeout=timeout, transport=transport)

    def close(self) -> None:
        """Close the connection pool."""
        self.http.close()

    def __enter__(self) -> DaemonClient:
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
            raise self._refusal(response)
        return None if response.status_code == 204 else response.json()

    def send(
        self, agent: str, content: str, *, idempotency_key: str | None = None, timeout_s: float = 300.0
    ) -> dict[str, Any]:
        """Send a message and wait up to `timeout_s` for the turn; the run (state `done` with the reply, `failed`
        with the error, or still `pending`/`running` past the timeout)."""
        body = {"content": content, "mode": "sync", "timeout_s": timeout_s}
        if idempotency_key:
            body["idempotency_key"] = idempotency_key
        run: dict[str, Any] = self.request("POST", f"/v1/agents/{agent}/messages", json=body, timeout=timeout_s + 30)
        return run

    async def stream_send(
        self, agent: str, content: str, *, idempotency_key: str | None = None, timeout_s: float = 300.0
    ) -> AsyncIterator[tuple[str, Any]]:
        """Send a message through the event-stream route and yield its server-sent events as (event, data)
        pairs as they arrive (`scheduler/api/sse.py` lists them; the last is `done` with the run). A refusal or no
        answer is a ClientError, as for `request`."""
        body: dict[str, Any] = {"content": content, "timeout_s": timeout_s}
        if idempotency_key:
            body["idempotency_key"] = idempotency_key
        timeout = httpx.Timeout(self.timeout, read=timeout_s + 30)
        async with httpx.AsyncClient(
            base_url=self.url, headers=self.headers, timeout=timeout, transport=self.async_transport
        ) as http:
            try:
                async with http.stream("POST", f"/v1/agents/{agent}/messages/stream", json=body) as response:
                    if response.status_code >= 400:
                        await response.aread()
                        raise self._refusal(response)
                    async for pair in read_sse(response.aiter_lines()):
                        yield pair
            except httpx.HTTPError as exc:
                raise ClientError(f"no answer from {self.url}: {type(exc).__name__}: {exc}") from None

    def _refusal(self, response: httpx.Response) -> ClientError:
        try:
            error = response.json()["error"]
            message, code = error["message"], error["code"]
        except (ValueError, KeyError, TypeError):
            message, code = response.text[:300] or response.reason_phrase, ""
        return ClientError(f"{self.url} answered {response.status_code}: {message}", response.status_code, code)

    def agents(self) -> list[dict[str, Any]]:
        """The agents the daemon serves."""
        agents: list[dict[str, Any]] = self.request("GET", "/v1/agents")["agents"]
        return agents

    def purge(self, name: str) -> dict[str, Any]:
        """Erase an agent made through the daemon from every store (`DELETE …?purge=true`); what was erased."""
        erased: dict[str, Any] = self.request("DELETE", f"/v1/agents/{name}", params={"purge": "true"}, timeout=600)
        return erased

    def has_agent(self, name: str) -> bool:
        """Whether the daemon serves an agent of this name."""
        try:
            self.request("GET", f"/v1/agents/{name}")
        except ClientError as exc:
            if exc.status == 404:
                return False
            raise
        return True


async def read_sse(lines: AsyncIterator[str]) -> AsyncIterator[tuple[str, Any]]:
    """(event, decoded JSON data) pairs of the daemon's event stream (`runtime.model.stream.sse_events` parses the
    wire); unnamed events, which the daemon never sends, are skipped."""
    from pagemind.runtime.model.stream import sse_events

    async for event, data in sse_events(lines):
        if event != "message":
            yield event, json.loads(data)
