"""The daemon's block PATCH on a structured block: JSON matching the schema is stored compact; anything else is a
422 naming the field, and the block stays structured afterwards."""

import json

import httpx
import pytest

from pagemind.runtime.process.settings import Settings
from pagemind.runtime.state.store import StateStore
from pagemind.scheduler.api.app import create_app
from pagemind.scheduler.catalog import AgentCatalog
from pagemind.scheduler.daemon import Daemon
from pagemind.scheduler.daemon_config import DaemonConfig
from tests.scheduler.api.test_api import error, scripted

PROFILED = """
name: profiled
model: {name: gpt-4o-mini}
system: You keep a profile.
blocks:
  - {label: profile, schema: "pagemind.blocks.profiles:CompanionProfile", value: {name: Lin}, limit: 300}
tools: [send_message, core_memory_update]
"""


@pytest.fixture
async def client(tmp_path, sqlite_url):
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "profiled.yaml").write_text(PROFILED)
    daemon = Daemon(
        AgentCatalog(folder, StateStore.open(sqlite_url)),
        Settings(home=tmp_path, database_url=sqlite_url),
        model=scripted(),
        config=DaemonConfig(concurrency=1, poll_s=0.05),
    )
    await daemon.start()
    async with httpx.AsyncClient(
        transport=httpx.ASGITransport(app=create_app(daemon, None, max_body=4096)), base_url="http://test"
    ) as http:
        yield http
    await daemon.stop(5)


async def test_patching_a_structured_block_checks_its_schema(client):
    url = "/v1/agents/profiled/memory/blocks/profile"
    message = error(await client.patch(url, json={"value": '{"name": "Lin", "people": {"Mei": {}}}'}), 422, "schema")
    assert "people.Mei.relation: Field required" in message
    assert "not valid JSON" in error(await client.patch(url, json={"value": "Name: Lin"}), 422, "schema")
    patched = await client.patch(url, json={"value": '{"name": "Lin",  "health": {"peanuts": "allergic"}}'})
    assert patched.status_code == 200 and patched.json()["value"] == '{"name":"Lin","health":{"peanuts":"allergic"}}'
    message = error(
        await client.patch(url, json={"value": json.dumps({"name": "Lin", "dates": {"x": "soon"}})}), 422, "schema"
    )  # the block in memory is still structured after a good patch
    assert "dates.x: String should match pattern" in message
