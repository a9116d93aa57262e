"""An agent's memory as an MCP server: the tools (`memory`), served over stdio by `pagemind mcp AGENT` (`stdio`) and
over streamable HTTP by the daemon at `/mcp/AGENT` (`pagemind.scheduler.api.mcp`)."""
