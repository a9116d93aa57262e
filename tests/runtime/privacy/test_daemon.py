"""The daemon's inbox is a store too: a message for an agent that redacts is stored with its placeholders; and the
API's own writes (a block's value, an archival memory) follow the agent's policy."""

from __future__ import annotations

from pathlib import Path

import httpx
import sqlalchemy

from pagemind.runtime.process.settings import Settings
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.models import FunctionModel
from pagemind.scheduler.api.app import create_app
from pagemind.scheduler.catalog import AgentCatalog
from pagemind.scheduler.daemon import Daemon
from tests.support.daemon_support import write_agents


def make_daemon(url: str, folder: Path) -> Daemon:
    settings = Settings.from_env({"PAGEMIND_HOME": str(folder.parent / "home"), "DATABASE_URL": url})
    return Daemon(AgentCatalog(folder, StateStore.open(settings.database_url)), settings)


async def test_a_submitted_message_is_stored_redacted(database_url, tmp_path):
    write_agents(tmp_path / "agents", ("alice",), privacy={"pii": "redact"})
    write_agents(tmp_path / "agents", ("bob",))
    daemon = make_daemon(database_url, tmp_path / "agents")
    item = await daemon.submit("alice", "call me at 13800138000", idempotency_key="k1")
    assert item.content == "call me at [phone#1]"
    again = await daemon.submit("alice", "call me at 13800138000", idempotency_key="k1")  # the same, once more
    assert again.run_id == item.run_id
    assert (await daemon.submit("bob", "call me at 13800138000")).content == "call me at 13800138000"
    with daemon.store.engine.connect() as conn:
        query = sqlalchemy.text("SELECT content FROM inbox WHERE agent_id = :id")
        stored = conn.execute(query, {"id": item.agent_id}).scalars().all()
    assert stored == ["call me at [phone#1]"]
    daemon.store.engine.dispose()


KEEPER = """
name: keeper
model: {name: gpt-4o-mini}
system: You keep notes.
blocks: [{label: human, value: "", limit: 200}]
tools: [send_message, archival_memory_insert, archival_search]
privacy: {pii: redact}
"""


async def test_the_apis_block_edit_and_archival_insert_follow_the_policy(tmp_path, sqlite_url):
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "keeper.yaml").write_text(KEEPER)
    settings = Settings(home=tmp_path / "home", database_url=sqlite_url)
    daemon = Daemon(AgentCatalog(folder, StateStore.open(sqlite_url)), settings, model=FunctionModel(lambda r: {}))
    await daemon.start()
    try:
        app = create_app(daemon, None, max_body=4096)
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
            patched = await client.patch(
                "/v1/agents/keeper/memory/blocks/human", json={"value": "Lin, mail lin@example.com"}
            )
            assert patched.status_code == 200, patched.text
            assert patched.json()["value"] == "Lin, mail [email#1]"
            stored = await client.post(
                "/v1/agents/keeper/memory/archival", json={"content": "Lin's card is 4111 1111 1111 1111"}
            )
            assert stored.status_code == 201, stored.text
            listing = (await client.get("/v1/agents/keeper/memory/archival")).json()
            assert [m["text"] for m in listing["memories"]] == ["Lin's card is [card#1]"]
    finally:
        await daemon.stop(5)
