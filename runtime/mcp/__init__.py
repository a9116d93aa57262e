"""MCP servers as an agent's tools: a session per server (`connection`), their tools beside the built-ins
(`toolset`)."""
