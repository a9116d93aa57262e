"""A YAML body posted to the API names no code: a structured block's schema must be inline JSON Schema (a
`module:Model` reference, which would be imported, is refused with a JSON 422 and nothing is imported), as its
tools must be built-in; the rule is the spec's own (`runtime/spec/trust.py`), so every field that names code
keeps it."""

from __future__ import annotations

import sys

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

POSTED = """
name: {name}
model: {{name: gpt-4o-mini}}
system: Posted through the API.
blocks:
  - {{label: profile, schema: {schema}, value: {{}}, limit: 300}}
"""


@pytest.fixture
async def client(tmp_path, sqlite_url):
    folder = tmp_path / "agents"
    folder.mkdir()
    settings = Settings(home=tmp_path / "home", database_url=sqlite_url)
    model = FunctionModel(lambda request: reply_body("hi"))
    daemon = Daemon(AgentCatalog(folder, StateStore.open(sqlite_url)), settings, model=model, config=DaemonConfig())
    await daemon.start()
    app = create_app(daemon, None)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as http:
        yield http
    await daemon.stop(5)


async def post(client: httpx.AsyncClient, name: str, schema: str) -> httpx.Response:
    body = POSTED.format(name=name, schema=schema)
    return await client.post("/v1/agents", content=body, headers={"content-type": "application/yaml"})


@pytest.mark.parametrize("reference", ["this:Anything", "pagemind.blocks.profiles:CompanionProfile"])
async def test_a_schema_naming_a_module_is_refused_and_nothing_is_imported(client, monkeypatch, reference):
    module = reference.partition(":")[0]
    monkeypatch.delitem(sys.modules, module, raising=False)
    answer = await post(client, "zen", f'"{reference}"')
    assert answer.status_code == 422, answer.text
    assert answer.headers["content-type"].startswith("application/json")
    error = answer.json()["error"]
    assert error["code"] == "forbidden_field"
    assert reference in error["message"] and "inline JSON Schema" in error["message"]
    assert "\n" not in error["message"]
    assert module not in sys.modules  # refused before anything was imported
    assert (await client.get("/v1/agents/zen")).status_code == 404


async def test_an_inline_schema_is_accepted(client):
    schema = "{type: object, properties: {name: {type: string}}, additionalProperties: false}"
    answer = await post(client, "inline", schema)
    assert answer.status_code == 201, answer.text
    assert (await client.get("/v1/agents/inline")).status_code == 200
