"""`/mcp/AGENT` on a running daemon (`pagemind serve` on a local port), with the SDK's own streamable HTTP client
and per-user keys: alice's key lists the memory tools of her agent, stores a memory and finds it, edits a block
(`pagemind memory AGENT` shows the edit), while bob's key gets the unknown agent's 404 for her agent, exactly as
for an agent that does not exist, and no key gets a 401."""

from __future__ import annotations

import json

import httpx
import httpx2
import pytest
from mcp.client.session import ClientSession
from mcp.client.streamable_http import streamable_http_client
from mcp.types import TextContent

from tests.scheduler.test_serve import pagemind, start_serve, stop, stub  # noqa: F401 - the model stub fixture

TEMPLATE = """
name: keeper
template: true
model: {name: gpt-4o-mini, context_window: 8192, max_output_tokens: 256, request_timeout_s: 10}
system: You keep notes.
blocks:
  - {label: human, value: "Name: Alice.", limit: 300}
tools: [send_message, core_memory_append, archival_memory_insert, archival_search, conversation_search]
"""

INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}},
}


@pytest.fixture
def served(tmp_path, stub):  # noqa: F811 - the fixture imported above
    import os

    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "keeper.yaml").write_text(TEMPLATE)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "DATABASE_URL", "QDRANT_", "PAGEMIND_"))}
    env.update(PAGEMIND_HOME=str(tmp_path / "home"), OPENAI_BASE_URL=stub, OPENAI_API_KEY="test-key")
    keys = {}
    for user in ("alice", "bob"):
        made = pagemind(env, "keys", "create", "--user", user)
        assert made.returncode == 0, made.stderr
        keys[user] = made.stdout.strip().splitlines()[-1]
    process, url = start_serve(folder, env)
    yield env, url, keys
    code, stderr = stop(process)
    assert code == 0, stderr


def text_of(result) -> str:
    assert all(isinstance(part, TextContent) for part in result.content)
    return "".join(part.text for part in result.content)


async def test_a_users_key_shares_its_agents_memory_over_mcp_and_no_other(served):
    env, url, keys = served
    alice = {"authorization": f"Bearer {keys['alice']}"}
    made = httpx.post(f"{url}/v1/agents", json={"template": "keeper", "name": "k-alice"}, headers=alice)
    assert made.status_code == 201, made.text

    async with (
        httpx2.AsyncClient(headers=alice, timeout=60) as client,
        streamable_http_client(f"{url}/mcp/k-alice", http_client=client) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        names = {tool.name for tool in (await session.list_tools()).tools}
        assert {"archival_search", "archival_insert", "core_memory_read", "core_memory_append"} <= names
        stored = await session.call_tool("archival_insert", {"content": "Alice's sister lives in Lyon"})
        assert not stored.is_error, text_of(stored)
        hits = json.loads(text_of(await session.call_tool("archival_search", {"query": "where does the sister live"})))
        assert hits and hits[0]["text"] == "Alice's sister lives in Lyon"
        edited = await session.call_tool("core_memory_append", {"label": "human", "content": "Sister in Lyon."})
        assert not edited.is_error, text_of(edited)

    shown = pagemind(env, "memory", "k-alice")
    assert shown.returncode == 0, shown.stderr
    assert "Sister in Lyon." in shown.stdout

    bob = {"authorization": f"Bearer {keys['bob']}"}
    accept = {"accept": "application/json, text/event-stream"}
    theirs = httpx.post(f"{url}/mcp/k-alice", json=INITIALIZE, headers={**bob, **accept})
    unknown = httpx.post(f"{url}/mcp/k-nobody", json=INITIALIZE, headers={**bob, **accept})
    assert theirs.status_code == unknown.status_code == 404
    assert theirs.json()["error"]["message"] == unknown.json()["error"]["message"].replace("k-nobody", "k-alice")
    assert theirs.json()["error"]["code"] == unknown.json()["error"]["code"] == "unknown_agent"
    assert httpx.post(f"{url}/mcp/k-alice", json=INITIALIZE, headers=accept).status_code == 401
    mine = httpx.post(f"{url}/mcp/k-alice", json=INITIALIZE, headers={**alice, **accept})
    assert mine.status_code == 200 and mine.json()["result"]["serverInfo"]["name"] == "pagemind"
