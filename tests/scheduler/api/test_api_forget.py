"""`POST /v1/agents/{name}/memory/forget` and `/memory/muted` through the ASGI app, over SQLite and Postgres: what a
query matches is gone from every file and row, the report counts it; topics are muted, listed and unmuted; another
user's key reaches none of it."""

from __future__ import annotations

import pytest

from pagemind.runtime.testing.models import FunctionModel, by_purpose
from tests.runtime.forgetting.support import completion as forgetting_completion
from tests.runtime.forgetting.support import files_holding
from tests.scheduler.api.test_api_purge import rows_holding, served  # noqa: F401  # (`served` is a fixture)
from tests.support.asgi_daemon import asgi_daemon

CANARY = "APICANARY3c9d"


async def test_forget_and_mute_through_the_api(served):  # noqa: F811  # (the fixture imported above)
    client, home, database_url = served
    assert (await client.post("/v1/agents", json={"template": "companion", "name": "u1"})).status_code == 201
    run = await client.post("/v1/agents/u1/messages", json={"content": f"my locker code is {CANARY}", "timeout_s": 30})
    assert run.status_code == 200, run.text
    sqlite = database_url.startswith("sqlite")
    holding = (lambda: files_holding(home.parent, CANARY)) if sqlite else (lambda: rows_holding(database_url, CANARY))
    assert holding()

    done = await client.post("/v1/agents/u1/memory/forget", json={"query": "locker code"})
    assert done.status_code == 200, done.text
    report = done.json()
    assert report["archival"] == 1 and report["messages"] >= 2 and report["block_lines"] == {"human": 1}
    assert CANARY not in done.text and holding() == []
    assert (await client.post("/v1/agents/u1/memory/forget", json={"query": " "})).status_code == 422

    muted = await client.post("/v1/agents/u1/memory/muted", json={"topic": "my ex Mark"})
    assert muted.json() == {"agent": "u1", "topics": ["my ex Mark"], "changed": True}
    assert (await client.get("/v1/agents/u1/memory/muted")).json()["topics"] == ["my ex Mark"]
    gone = await client.delete("/v1/agents/u1/memory/muted", params={"topic": "my ex mark"})
    assert gone.json() == {"agent": "u1", "topics": [], "changed": True}
    assert (await client.get("/v1/agents/nobody/memory/muted")).status_code == 404


async def test_review_routes_list_and_pin(served):  # noqa: F811  # (the fixture imported above)
    client, _, _ = served
    assert (await client.post("/v1/agents", json={"template": "companion", "name": "u2"})).status_code == 201
    listed = await client.get("/v1/agents/u2/memory/review")
    assert listed.json() == {"agent": "u2", "required": [], "pending": []}
    stored = await client.post("/v1/agents/u2/memory/archival", json={"content": "Sam is allergic to peanuts"})
    memory_id = stored.json()["id"]
    pinned = await client.post(f"/v1/agents/u2/memory/archival/{memory_id}/pin")
    assert pinned.json() == {"id": memory_id, "decision": "pinned", "memory_id": memory_id}
    [memory] = (await client.get("/v1/agents/u2/memory/archival")).json()["memories"]
    assert "pinned" in memory["tags"]
    assert (await client.post("/v1/agents/u2/memory/archival/nope/pin")).status_code == 404
    assert (await client.post("/v1/agents/u2/memory/review/nope/reject")).status_code == 404
    approve = await client.post("/v1/agents/u2/memory/review/nope/approve", json={"pin": True})
    assert approve.status_code == 404


TOOL_TEMPLATE = """
name: confidant
template: true
model: {name: gpt-4o-mini, context_window: 8192, max_output_tokens: 256}
system: You keep notes.
blocks: [{label: human, value: "", limit: 2000}]
tools: [send_message, memory_rethink, archival_memory_insert, archival_search, forget, mute_topic, unmute_topic]
"""


@pytest.fixture
async def tool_served(tmp_path, database_url):
    async def respond(request):
        return forgetting_completion({"messages": request.messages, "tools": request.tools})

    model = FunctionModel(by_purpose(respond))
    async with asgi_daemon(tmp_path, database_url, {"confidant.yaml": TOOL_TEMPLATE}, model, max_body=4096) as daemon:
        yield daemon.client, daemon.home, database_url


async def test_the_daemon_finishes_a_tool_forget_when_the_turn_ends(tool_served):
    client, home, database_url = tool_served
    assert (await client.post("/v1/agents", json={"template": "confidant", "name": "c1"})).status_code == 201
    for text in (f"my home address is 9 {CANARY} Road", "forget home address"):
        run = await client.post("/v1/agents/c1/messages", json={"content": text, "timeout_s": 30})
        assert run.status_code == 200, run.text
    sqlite = database_url.startswith("sqlite")
    assert (files_holding(home.parent, CANARY) if sqlite else rows_holding(database_url, CANARY)) == []
    newest = await client.get("/v1/agents/c1/memory/recall/search", params={"limit": 20})
    assert CANARY not in newest.text and "forgotten on" in newest.text
