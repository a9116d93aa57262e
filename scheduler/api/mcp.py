"""`/mcp/{name}` on the daemon: agent `name`'s memory as an MCP server over streamable HTTP (`runtime.mcp_server`).

The agent is named in the path (one URL per agent, which is what MCP clients are configured with: a header would
need a client that can send one). The route is behind `Guard` like every other: the bearer token or an API key in
`Authorization`, and a user key reaches its own user's agents only — another user's agent answers the 404 of an
unknown one, before any MCP message is read. Each tool call holds the agent as the memory routes do
(`Daemon.agent`: its turns held off, its state read again), so an MCP client and the agent's turns never race.

The SDK's session manager runs stateless with JSON answers (each POST is one exchange; nothing is kept between
requests, so any worker of `serve --workers N` answers), started on the first request. Its DNS-rebinding check is
on for a daemon that needs no credential (loopback only: a web page must not reach it through a rebound name),
off where `Guard` requires one.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import structlog
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import Receive, Scope, Send

from pagemind.runtime.mcp_server.memory import memory_server
from pagemind.runtime.state.locks import AgentBusy
from pagemind.scheduler.api.auth import KeyRing, Principal
from pagemind.scheduler.errors import DaemonError, UnknownAgent

if TYPE_CHECKING:
    from pagemind.runtime.agent import Agent
    from pagemind.scheduler.daemon import Daemon

log = structlog.get_logger("pagemind.api")

AGENT_KEY = "pagemind_mcp_agent"  # where the endpoint leaves the agent's name in the request's state


class McpEndpoint:
    """The ASGI app mounted at `/mcp` (see the module docstring)."""

    def __init__(self, daemon: Daemon, keyring: KeyRing):
        self.daemon, self.keyring = daemon, keyring
        self.server = memory_server(self._access, name="pagemind")
        security = TransportSecuritySettings(
            enable_dns_rebinding_protection=not keyring.required,
            allowed_hosts=["127.0.0.1:*", "localhost:*", "[::1]:*"],
            allowed_origins=["http://127.0.0.1:*", "http://localhost:*", "http://[::1]:*"],
        )
        self.server.streamable_http_app(stateless_http=True, json_response=True, transport_security=security)
        self._running: asyncio.Task[None] | None = None
        self._started = asyncio.Event()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        path = str(scope["path"]).removeprefix(str(scope.get("root_path", "")))
        name = path.strip("/")
        if not name or "/" in name:
            raise UnknownAgent(name or "(none: the URL is /mcp/AGENT)")
        principal: Principal | None = scope.get("state", {}).get("principal")
        if principal is None or (not principal.admin and await self.keyring.keys.owner_awaited(name) != principal.user):
            raise UnknownAgent(name)  # exactly what an unknown agent answers: no oracle for other users' agents
        scope.setdefault("state", {})[AGENT_KEY] = name
        await self._start()
        await self.server.session_manager.handle_request(scope, receive, send)

    async def _start(self) -> None:
        """Run the SDK's session manager for the life of the process, from the first request on."""
        if self._running is None:
            self._running = asyncio.get_running_loop().create_task(self._run(), name="mcp sessions")
        if self._started.is_set():
            return
        started = asyncio.ensure_future(self._started.wait())
        await asyncio.wait({started, self._running}, return_when=asyncio.FIRST_COMPLETED)
        started.cancel()
        if not self._started.is_set():  # the manager failed to start: say so rather than wait for ever
            failed = self._running.exception() if not self._running.cancelled() else None
            raise RuntimeError(f"the MCP session manager did not start: {failed!r}")

    async def _run(self) -> None:
        async with self.server.session_manager.run():
            self._started.set()
            await asyncio.Event().wait()  # until the process ends (the task is cancelled with its loop)

    @asynccontextmanager
    async def _access(self, ctx: Context) -> AsyncIterator[Agent]:
        request: Any = ctx.request_context.request
        name = request.scope["state"][AGENT_KEY]  # set by `__call__`, checked against the key there
        try:
            async with self.daemon.agent(name) as agent:
                yield agent
        except (DaemonError, AgentBusy) as exc:  # gone, its YAML does not load, stopping; a turn past the wait
            raise ToolError(str(exc)) from None
