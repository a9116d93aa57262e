"""A real MCP server written with the SDK, for tests: run as `python tests/support/mcp_server.py` (stdio).

Tools: `add` (a sum), `shout` (text back in capitals, or a tool error for empty text), `hang` (never answers),
`crash` (the process exits mid-call), `grow` (adds the tool `late` and tells the client its tools changed). With
MCP_TEST_MARKER set, it appends a line to that file when it starts.
"""

from __future__ import annotations

import asyncio
import os

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError

server = MCPServer("pagemind-test-server")


@server.tool()
def add(a: int, b: int) -> str:
    """Add two whole numbers."""
    return str(a + b)


@server.tool()
def shout(text: str) -> str:
    """Say the text in capitals."""
    if not text:
        raise ToolError("nothing to shout")
    return text.upper()


@server.tool()
async def hang() -> str:
    """Never answer (a server stuck on a call)."""
    await asyncio.Event().wait()
    return "unreachable"


@server.tool()
def crash() -> str:
    """End the server's process mid-call (a server that dies)."""
    os._exit(3)


def late() -> str:
    """A tool that exists once `grow` was called."""
    return "late tool here"


@server.tool()
async def grow(ctx: Context) -> str:
    """Add the tool `late` and tell the client the tool list changed."""
    server.add_tool(late)
    await ctx.session.send_tool_list_changed()
    return "grown"


if __name__ == "__main__":
    if os.environ.get("MCP_TEST_MARKER"):  # a test that must know whether the server was ever started
        with open(os.environ["MCP_TEST_MARKER"], "a") as marker:
            marker.write("started\n")
    server.run()
