"""The tools of an agent's MCP servers, beside its own: listed once per server and cached, listed again when the
server says they changed, and each call bounded in time with every failure a tool error the model reads.

`McpToolset.sync(tools)` runs at the start of each turn (`Agent.prefetch`): it lists the servers whose listing is
missing or stale (concurrently, each within its `timeout_s`) and puts their tools into the agent's tool dict, so the
compiled prompt carries their schemas. Names: a server's tools keep their names, after the server's `prefix`; a name
already taken (a built-in, a custom tool, an earlier server's tool) is refused: that tool is left out and a warning
says which and how to fix it (`prefix:`). A server that cannot be listed keeps the tools it had (their calls fail
as tool errors until it is back), and is tried again after `RETRY_LIST_S`, not at every turn.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from typing import Any

import structlog
from mcp import types
from pydantic import BaseModel, ConfigDict

from pagemind.runtime.mcp.connection import McpConnection, McpUnavailable
from pagemind.runtime.spec.mcp import McpServerSpec
from pagemind.tools import Tool, ToolContext, ToolError

log = structlog.get_logger("pagemind.mcp")

RETRY_LIST_S = 60.0  # a server whose listing failed is listed again after this long (a hung one costs timeout_s)


class AnyArguments(BaseModel):
    """An MCP tool's arguments go to the server as the model sent them: the server validates them."""

    model_config = ConfigDict(extra="allow")


@dataclass(frozen=True)
class McpTool(Tool):
    """A tool an MCP server offers: calling it calls the server (never held with a step: its effects are outside)."""

    connection: McpConnection | None = None
    remote_name: str = ""

    async def invoke(self, arguments: BaseModel, context: ToolContext | None) -> Any:
        """Call the server's tool; a failure of the server or of the tool raises ToolError (a tool error result)."""
        assert self.connection is not None  # set by `mcp_tool`
        try:
            result = await self.connection.call_tool(self.remote_name, arguments.model_dump())
        except McpUnavailable as exc:
            raise ToolError(str(exc)) from None
        text = render_result(result)
        if result.is_error:
            raise ToolError(text or f"{self.name} reported an error and said nothing more")
        return text


def render_result(result: types.CallToolResult) -> str:
    """A tool result as the text the model reads: text parts as they are, other parts named, structured content as
    JSON when there is no text."""
    parts: list[str] = []
    for block in result.content:
        if isinstance(block, types.TextContent):
            parts.append(block.text)
        elif isinstance(block, types.ImageContent | types.AudioContent):
            parts.append(f"[{block.mime_type} content, {len(block.data) * 3 // 4} bytes, not shown]")
        elif isinstance(block, types.ResourceLink):
            parts.append(f"[resource {block.uri}]")
        elif isinstance(block, types.EmbeddedResource):
            inner = block.resource
            parts.append(inner.text if isinstance(inner, types.TextResourceContents) else f"[resource {inner.uri}]")
    if not parts and result.structured_content is not None:
        parts.append(json.dumps(result.structured_content, ensure_ascii=False, default=str))
    return "\n".join(parts)


def mcp_tool(connection: McpConnection, listed: types.Tool) -> McpTool:
    """The agent's tool for one listed MCP tool, named with the server's prefix, with the server's schema."""
    name = connection.spec.prefix + listed.name
    description = listed.description or listed.title or f"{listed.name} (MCP server {connection.spec.label})"
    parameters = dict(listed.input_schema) or {"type": "object", "properties": {}}
    schema = {"type": "function", "function": {"name": name, "description": description, "parameters": parameters}}
    return McpTool(
        name=name,
        description=description,
        function=_never_called,
        args_model=AnyArguments,
        context_param=None,
        terminal=False,
        read_only=False,  # a read-only hint is the server's word; a step with a call is committed before the next
        schema=schema,
        connection=connection,
        remote_name=listed.name,
    )


def _never_called(**_: Any) -> None:
    """An MCP tool runs on its server (`McpTool.invoke`)."""
    raise AssertionError("McpTool.invoke calls the server")


@dataclass
class McpToolset:
    """The MCP servers of one agent and the tools they gave it (see the module docstring)."""

    connections: list[McpConnection]
    listed: dict[int, list[types.Tool]] = field(default_factory=dict)  # by connection index: the last listing
    added: set[str] = field(default_factory=set)  # the names this toolset put in the agent's tool dict
    retry_at: dict[int, float] = field(default_factory=dict)
    refused: set[tuple[str, str]] = field(default_factory=set)  # (server, name) already warned about

    @classmethod
    def for_servers(cls, servers: list[McpServerSpec]) -> McpToolset | None:
        """A toolset for the servers this process may use (`McpServerSpec.startable`), or None when there are
        none. A server from a shared source is left out, said once in the log."""
        usable = [s for s in servers if s.startable]
        for server in servers:
            if not server.startable:
                log.warning("mcp_server_not_started", server=server.label, why="named by a shared source")
        return cls([McpConnection(s) for s in usable]) if usable else None

    async def sync(self, tools: dict[str, Tool]) -> None:
        """List the servers whose listing is missing or stale, and put their tools into `tools` (see the module
        docstring for names); a server that fails keeps its last tools."""
        now = time.monotonic()
        due = [
            i
            for i, c in enumerate(self.connections)
            if (c.tools_changed or i not in self.listed) and self.retry_at.get(i, 0.0) <= now
        ]
        if not due:
            return
        listings = await asyncio.gather(*(self.connections[i].list_tools() for i in due), return_exceptions=True)
        for index, listing in zip(due, listings, strict=True):
            if isinstance(listing, BaseException):
                self.retry_at[index] = now + RETRY_LIST_S
                log.warning("mcp_list_failed", server=self.connections[index].spec.label, error=str(listing))
            else:
                self.listed[index] = listing
                self.retry_at.pop(index, None)
        self._place(tools)

    def _place(self, tools: dict[str, Tool]) -> None:
        for name in self.added:
            tools.pop(name, None)
        self.added = set()
        for index, connection in enumerate(self.connections):
            for listed in self.listed.get(index, []):
                tool = mcp_tool(connection, listed)
                if tool.name in tools:
                    self._refuse(connection, tool.name)
                    continue
                tools[tool.name] = tool
                self.added.add(tool.name)

    def _refuse(self, connection: McpConnection, name: str) -> None:
        if (connection.spec.label, name) in self.refused:
            return
        self.refused.add((connection.spec.label, name))
        log.warning(
            "mcp_tool_name_taken",
            server=connection.spec.label,
            tool=name,
            fix="the agent has a tool of that name already; give the server a `prefix:` (e.g. `prefix: x_`)",
        )

    async def close(self) -> None:
        """End every session (stdio servers stop)."""
        await asyncio.gather(*(c.close() for c in self.connections), return_exceptions=True)

    def close_soon(self) -> None:
        """`close` in the background, for a caller that cannot wait (an agent dropped from the daemon's pool);
        nothing to do outside an event loop (none of its sessions can be open there)."""
        try:
            task = asyncio.get_running_loop().create_task(self.close(), name="mcp close")
        except RuntimeError:
            return
        _CLOSING.add(task)  # held until done: the loop keeps only a weak reference to a task
        task.add_done_callback(_CLOSING.discard)


_CLOSING: set[asyncio.Task[None]] = set()
