"""Commands that connect an agent to other tools and formats: `pagemind mcp` (its memory as an MCP server),
`pagemind export` and `pagemind import` (its JSON Lines file, Letta agent files)."""
