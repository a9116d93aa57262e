"""`pagemind mcp AGENT` as an MCP client runs it: the SDK's own stdio client starts the venv's `pagemind` as a
subprocess, lists the memory tools, stores a memory and finds it, edits a block (a versioned edit that `pagemind
memory AGENT` shows, with its history), is refused a read-only block's edit, and forgets the memory by id. On
SQLite and on PostgreSQL."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.types import TextContent

AGENT_YAML = """\
name: keeper
model: {name: gpt-4o-mini}
system: You keep notes.
blocks:
  - {label: human, value: "Name: Lin.", limit: 500}
  - {label: rules, value: "Be kind.", read_only: true}
tools: [send_message, core_memory_append, archival_memory_insert, archival_search, conversation_search]
"""

PAGEMIND = Path(sys.executable).parent / "pagemind"  # the venv's console script, as an MCP client would start it


def environment(home: Path, database_url: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "DATABASE_URL", "QDRANT_", "PAGEMIND_"))}
    return {**env, "PAGEMIND_HOME": str(home), "DATABASE_URL": database_url}


def text_of(result) -> str:
    assert all(isinstance(part, TextContent) for part in result.content)
    return "".join(part.text for part in result.content)


async def test_an_mcp_client_shares_the_agents_memory_over_stdio(tmp_path, database_url):
    agent = tmp_path / "keeper.yaml"
    agent.write_text(AGENT_YAML)
    home = tmp_path / "home"
    params = StdioServerParameters(command=str(PAGEMIND), args=["mcp", str(agent)], env=environment(home, database_url))
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()
        listed = {tool.name: tool for tool in (await session.list_tools()).tools}
        assert set(listed) == {
            "archival_search",
            "conversation_search",
            "archival_insert",
            "core_memory_read",
            "core_memory_append",
            "core_memory_replace",
            "memory_rethink",
            "archival_forget",
        }
        assert listed["archival_insert"].input_schema["required"] == ["content"]

        stored = await session.call_tool(
            "archival_insert", {"content": "Lin is allergic to peanuts", "tags": ["health"]}
        )
        assert not stored.is_error, text_of(stored)
        memory_id = json.loads(text_of(stored))["id"]
        found = await session.call_tool("archival_search", {"query": "peanut allergy"})
        hits = json.loads(text_of(found))
        assert hits[0]["id"] == memory_id and hits[0]["text"] == "Lin is allergic to peanuts"

        edited = await session.call_tool("core_memory_append", {"label": "human", "content": "Allergic to peanuts."})
        assert json.loads(text_of(edited))["value"] == "Name: Lin.\nAllergic to peanuts."
        refused = await session.call_tool("memory_rethink", {"label": "rules", "new_value": "Be rude."})
        assert refused.is_error and "read-only" in text_of(refused)
        blocks = json.loads(text_of(await session.call_tool("core_memory_read", {})))
        assert [b["label"] for b in blocks] == ["human", "rules"] and blocks[1]["value"] == "Be kind."

        forgotten = await session.call_tool("archival_forget", {"memory_id": memory_id})
        assert json.loads(text_of(forgotten)) == {"forgotten": memory_id}
        assert json.loads(text_of(await session.call_tool("archival_search", {"query": "peanut allergy"}))) == []

    shown = subprocess.run(
        [str(PAGEMIND), "memory", "keeper", "--history"],
        env=environment(home, database_url),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shown.returncode == 0, shown.stderr
    assert "Allergic to peanuts." in shown.stdout and "append" in shown.stdout
