"""One MCP server's session, kept open across turns, bounded in time, and restarted after any failure.

The SDK's transports and `ClientSession` are async context managers whose task groups must be entered and left in
one task, so each session lives in a task of its own (`_serve`): it opens the transport, initializes, and waits to
be closed. Calls from a turn go through the open session and are bounded by the server's `timeout_s`. A server
that hangs, dies, or answers with a protocol error fails that one call (`McpUnavailable`, which the tool turns into
a tool error the model reads) and its session is closed; the next call starts a new one. A server that says its
tools changed (`notifications/tools/list_changed`) marks its listing stale; the toolset lists it again at the next
turn.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, TypeVar

import structlog
from mcp import types
from mcp.client.session import ClientSession, IncomingMessage

from pagemind.runtime.process.settings import Settings
from pagemind.runtime.spec.mcp import McpServerSpec

log = structlog.get_logger("pagemind.mcp")

T = TypeVar("T")
CLOSE_S = 5.0  # how long closing a session may take (the SDK's stdio shutdown is bounded by its own timeouts)


class McpUnavailable(Exception):
    """The server did not answer as it should (start failed, hung past its timeout, died, protocol error)."""


def _transport(spec: McpServerSpec) -> AbstractAsyncContextManager[Any]:
    """The SDK transport for `spec`: a subprocess over stdio, or streamable HTTP with the configured headers."""
    if spec.command is not None:
        from mcp.client.stdio import StdioServerParameters, stdio_client

        params = StdioServerParameters(command=spec.command, args=spec.args, env=spec.env or None, cwd=spec.cwd)
        return stdio_client(params)
    import httpx2

    headers = dict(spec.headers)
    if spec.bearer_token_env is not None:
        token = Settings.api_key(spec.bearer_token_env)
        if token is None:
            raise McpUnavailable(f"the variable {spec.bearer_token_env} (bearer_token_env) is not set")
        headers["Authorization"] = f"Bearer {token}"
    assert spec.url is not None  # one of command and url is set (`McpServerSpec`)
    # The SDK's own defaults: 30 s to connect, a read may wait 300 s (a stream stays open); `timeout_s` bounds calls.
    return _http(spec.url, httpx2.AsyncClient(headers=headers, timeout=httpx2.Timeout(30.0, read=300.0)))


@contextlib.asynccontextmanager
async def _http(url: str, client: Any) -> AsyncIterator[Any]:
    from mcp.client.streamable_http import streamable_http_client

    async with client, streamable_http_client(url, http_client=client) as streams:
        yield streams


class McpConnection:
    """The session with one server (see the module docstring); one per server and agent."""

    def __init__(self, spec: McpServerSpec):
        self.spec = spec
        self.tools_changed = True  # no listing yet: the first turn lists the tools
        self._session: ClientSession | None = None
        self._task: asyncio.Task[None] | None = None
        self._closing: asyncio.Event | None = None
        self._start: asyncio.Lock | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def is_open(self) -> bool:
        """Whether a session is open (its task running)."""
        return self._task is not None and not self._task.done()

    async def list_tools(self) -> list[types.Tool]:
        """Every tool the server offers (all pages), within the server's timeout."""
        self.tools_changed = False  # a change announced while listing marks it again

        async def listing(session: ClientSession) -> list[types.Tool]:
            tools: list[types.Tool] = []
            cursor: str | None = None
            while True:
                params = types.PaginatedRequestParams(cursor=cursor) if cursor else None
                page = await session.list_tools(params=params)
                tools += page.tools
                cursor = page.next_cursor
                if not cursor:
                    return tools

        try:
            return await self._bounded("tools/list", listing)
        except McpUnavailable:
            self.tools_changed = True
            raise

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        """Call one tool within the server's timeout; raises McpUnavailable (the session is then closed)."""

        async def call(session: ClientSession) -> types.CallToolResult:
            return await session.call_tool(name, arguments)

        return await self._bounded(f"tool {name}", call)

    async def _bounded(self, what: str, act: Callable[[ClientSession], Awaitable[T]]) -> T:
        phase, timeout = "start", self.spec.start_timeout_s
        try:
            async with asyncio.timeout(timeout):
                session = await self._open()
            phase, timeout = what, self.spec.timeout_s
            async with asyncio.timeout(timeout):
                return await act(session)
        except TimeoutError:
            await self.close()
            raise McpUnavailable(
                f"MCP server '{self.spec.label}' did not answer {'its start' if phase == 'start' else phase} within "
                f"{timeout:g} s; its session was closed and restarts at the next call"
            ) from None
        except McpUnavailable:
            await self.close()
            raise
        except Exception as exc:  # the SDK's errors (closed connection, MCPError, a broken pipe) are all one here
            await self.close()
            log.warning("mcp_call_failed", server=self.spec.label, what=phase, error=f"{type(exc).__name__}: {exc}")
            raise McpUnavailable(
                f"MCP server '{self.spec.label}' failed on {phase} ({type(exc).__name__}: {exc or 'no detail'}); "
                "its session was closed and restarts at the next call"
            ) from None

    async def _open(self) -> ClientSession:
        """The open session, started first when there is none (or it belongs to another event loop)."""
        loop = asyncio.get_running_loop()
        if self._loop is not loop:  # a session (its streams, its task) works only on the loop that made it
            self._session, self._task, self._loop = None, None, loop
            self._start, self._closing = asyncio.Lock(), asyncio.Event()
        assert self._start is not None
        async with self._start:
            if self._session is not None and self._task is not None and not self._task.done():
                return self._session
            self._closing = asyncio.Event()
            ready: asyncio.Future[ClientSession] = loop.create_future()
            ready.add_done_callback(lambda done: done.cancelled() or done.exception())  # read: never "not retrieved"
            self._task = loop.create_task(self._serve(ready, self._closing), name=f"mcp {self.spec.label}")
            try:
                self._session = await asyncio.shield(ready)
            except asyncio.CancelledError:
                self._task.cancel()  # a timeout while starting: the half-started session goes too
                raise
            return self._session

    async def _serve(self, ready: asyncio.Future[ClientSession], closing: asyncio.Event) -> None:
        """The session's own task: open, initialize, hand the session over, wait to be closed."""
        if not self.spec.startable:  # checked here too: whatever built the toolset, a shared spec starts nothing
            ready.set_exception(McpUnavailable(f"MCP server '{self.spec.label}' comes from a shared source"))
            return
        opened: ClientSession | None = None
        try:
            async with (
                _transport(self.spec) as (read, write),
                ClientSession(read, write, message_handler=self._heard) as session,
            ):
                await session.initialize()
                log.info("mcp_session_started", server=self.spec.label)
                opened = session
                ready.set_result(session)
                await closing.wait()
        except BaseException as exc:
            if not ready.done():
                ready.set_exception(exc if isinstance(exc, Exception) else McpUnavailable(repr(exc)))
            if not isinstance(exc, Exception):
                raise
            log.warning("mcp_session_ended", server=self.spec.label, error=f"{type(exc).__name__}: {exc}")
        finally:
            if self._session is opened:  # not a newer session's, started while this one was closing
                self._session = None

    async def _heard(self, message: IncomingMessage) -> None:
        if isinstance(message, types.ToolListChangedNotification):
            self.tools_changed = True
            log.info("mcp_tools_changed", server=self.spec.label)

    async def close(self) -> None:
        """End the session (the server process with it), if one is open on this loop; safe to call again."""
        task, self._session = self._task, None
        if task is None or task.done() or self._loop is not asyncio.get_running_loop():
            return
        assert self._closing is not None
        self._closing.set()
        try:
            async with asyncio.timeout(CLOSE_S):
                await asyncio.shield(task)
        except (TimeoutError, Exception):
            task.cancel()
