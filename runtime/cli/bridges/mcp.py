"""`pagemind mcp AGENT`: serve one agent's memory to an MCP client over stdio (`runtime.mcp_server`).

    {"mcpServers": {"companion": {"command": "pagemind", "args": ["mcp", "companion"]}}}

Standard library only at module level (the parser is built at every start); the server is imported when it runs.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from pagemind.runtime.cli.held_store import open_archival
from pagemind.runtime.cli.shared import open_store, resolve_spec

if TYPE_CHECKING:
    from pagemind.runtime.process.settings import Settings


def add_parser(sub: Any) -> None:
    """Add `mcp` to the CLI's subparsers."""
    mcp = sub.add_parser(
        "mcp",
        help="serve an agent's memory to an MCP client over stdio (Claude Code, Cursor): search, insert, edit blocks",
    )
    mcp.add_argument("agent", help="agent YAML file or stored agent name")
    mcp.add_argument(
        "--wait",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="how long a call waits while a turn of the agent runs elsewhere (default 30)",
    )
    mcp.set_defaults(handler=cmd_mcp)


def _through_daemon(name: str) -> Any:
    return lambda url: f"point the MCP client at the daemon instead: {url}/mcp/{name} (streamable HTTP)"


async def cmd_mcp(args: argparse.Namespace, settings: Settings) -> int:
    """Load the agent as a turn would (no turn runs here, so none of its tools or MCP servers is called) and
    serve its memory until the client closes stdin."""
    from pagemind.runtime.agent import Agent
    from pagemind.runtime.mcp_server.stdio import serve_stdio

    store = open_store(settings)
    agent = await Agent.load(resolve_spec(args.agent, store), store=store)
    await open_archival(agent.archival, settings, args.wait, _through_daemon(agent.name))
    await serve_stdio(agent, args.wait)
    return 0
