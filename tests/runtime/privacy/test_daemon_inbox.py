"""The daemon's inbox is a store too: a message for an agent that redacts is stored with its placeholders."""

from __future__ import annotations

from pathlib import Path

import sqlalchemy

from pagemind.runtime.process.settings import Settings
from pagemind.runtime.state.store import StateStore
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
