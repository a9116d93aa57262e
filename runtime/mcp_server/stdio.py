"""`pagemind mcp AGENT`: the agent's memory server on stdin/stdout, for an MCP client that starts it (Claude Code,
Cursor). Each call holds the agent's turn lock (a turn running elsewhere, a chat or the daemon, finishes first;
`AgentBusy` after `wait` seconds is a tool error) and reads again what another process changed, as the daemon's
memory routes do. stdout carries the protocol alone: logs go to stderr."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError

from pagemind.runtime.agent import Agent
from pagemind.runtime.mcp_server.memory import memory_server
from pagemind.runtime.state.locks import AgentBusy


async def serve_stdio(agent: Agent, wait: float) -> None:
    """Serve `agent`'s memory until the client closes stdin."""

    @asynccontextmanager
    async def access(_: Context) -> AsyncIterator[Agent]:
        try:
            async with agent.store.turn_lock(agent.record.id, wait, agent.name):
                await agent.refresh()
                yield agent
        except AgentBusy as exc:
            raise ToolError(str(exc)) from None

    await memory_server(access, name=f"pagemind {agent.name}").run_stdio_async()
