"""Every refusal of the API is one clear JSON line, with the status its OpenAPI document gives: block values a
template does not take are 422 (never a 400 with pydantic's multi-line dump), the 409s of deleting and of an
idempotency key are documented, and an archival memory's documented length is the length accepted."""

from __future__ import annotations

import httpx
import pytest

from pagemind.runtime.process.settings import Settings
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.models import FunctionModel
from pagemind.runtime.testing.responses import reply_body
from pagemind.scheduler.api.app import create_app
from pagemind.scheduler.catalog import AgentCatalog
from pagemind.scheduler.daemon import Daemon
from pagemind.scheduler.daemon_config import DaemonConfig

TEMPLATE = """
name: companion
template: true
model: {name: gpt-4o-mini}
system: You are a warm companion.
blocks:
  - {label: human, value: "", limit: 100}
tools: [send_message, archival_memory_insert, archival_search]
"""


@pytest.fixture
async def client(tmp_path, sqlite_url):
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "companion.yaml").write_text(TEMPLATE)
    settings = Settings(home=tmp_path / "home", database_url=sqlite_url)
    model = FunctionModel(lambda request: reply_body("hi"))
    daemon = Daemon(AgentCatalog(folder, StateStore.open(sqlite_url)), settings, model=model, config=DaemonConfig())
    await daemon.start()
    app = create_app(daemon, None)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
        yield http
    await daemon.stop(5)


def one_line_error(answer: httpx.Response, status: int, code: str) -> str:
    assert answer.status_code == status, answer.text
    error = answer.json()["error"]
    assert error["code"] == code and "\n" not in error["message"], error
    return error["message"]


async def test_block_values_a_template_does_not_take_are_a_one_line_422(client):
    body = {"template": "companion", "name": "u1", "blocks": {"human": "x" * 500}}
    message = one_line_error(await client.post("/v1/agents", json=body), 422, "invalid_blocks")
    assert "human" in message and "limit of 100" in message
    body = {"template": "companion", "name": "u2", "blocks": {"nope": "x"}}
    assert "no block 'nope'" in one_line_error(await client.post("/v1/agents", json=body), 422, "invalid_blocks")


async def test_the_openapi_document_gives_the_statuses_the_routes_answer(client):
    paths = (await client.get("/openapi.json")).json()["paths"]
    assert {"409", "422"} <= set(paths["/v1/agents"]["post"]["responses"])
    assert "400" not in paths["/v1/agents"]["post"]["responses"]
    assert "409" in paths["/v1/agents/{name}"]["delete"]["responses"]  # a folder's agent is not deletable
    for route in ("/v1/agents/{name}/messages", "/v1/agents/{name}/messages/stream"):
        assert "409" in paths[route]["post"]["responses"]  # an idempotency key reused
    assert "400" in paths["/v1/runs/{run_id}/events"]["get"]["responses"]


async def test_an_archival_memory_is_documented_as_long_as_it_is_accepted(client):
    schema = (await client.get("/openapi.json")).json()["components"]["schemas"]["ArchivalInsertIn"]
    longest = schema["properties"]["content"]["maxLength"]
    assert (await client.post("/v1/agents", json={"template": "companion", "name": "u3"})).status_code == 201
    stored = await client.post("/v1/agents/u3/memory/archival", json={"content": "y" * longest})
    assert stored.status_code == 201, stored.text
    refused = await client.post("/v1/agents/u3/memory/archival", json={"content": "y" * (longest + 1)})
    assert refused.status_code == 422


async def test_a_reused_idempotency_key_is_a_409_on_both_message_routes(client):
    assert (await client.post("/v1/agents", json={"template": "companion", "name": "u4"})).status_code == 201
    first = {"content": "one", "idempotency_key": "k-1", "mode": "async"}
    assert (await client.post("/v1/agents/u4/messages", json=first)).status_code in (200, 202)
    other = {"content": "two", "idempotency_key": "k-1"}
    for route in ("/v1/agents/u4/messages", "/v1/agents/u4/messages/stream"):
        one_line_error(await client.post(route, json=other), 409, "idempotency_key_reused")


async def test_a_yaml_body_with_several_problems_is_one_line_naming_each(client):
    body = "name: broken\nmodel: {name: m, context_window: -1}\nsystem: ''\nmax_steps_per_turn: 0\n"
    answer = await client.post("/v1/agents", content=body, headers={"content-type": "application/yaml"})
    message = one_line_error(answer, 422, "invalid_yaml")
    assert message.count("<request body>:") >= 2 and "; " in message
