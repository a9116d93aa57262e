"""The model calls `forget` when the user asks: what matched is gone from every tier, every file under PAGEMIND_HOME
(database with its WAL, the vector shard, traces) and every table, and what is not about it stays."""

from __future__ import annotations

import pytest

from pagemind.runtime.memory.vectors.stores import close_all
from tests.runtime.forgetting.support import completion, files_holding, load, tables_holding
from tests.support.model_server import model_server

CANARY = "QUILLCANARY"
KEPT = "KEEPCANARY"


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    yield
    close_all()


async def test_the_model_forgets_an_address_everywhere_and_keeps_the_rest(database_url, isolated_home):
    with model_server(completion) as url:
        agent = await load(url, database_url, isolated_home)
        await agent.send(f"my home address is 12 {CANARY} Lane")
        await agent.send(f"my favourite tea is {KEPT} oolong")
        assert files_holding(isolated_home, CANARY)
        result = await agent.run_turn("forget home address")
    [forget_result] = [m for m in result.messages if m.role == "tool" and m.name == "forget"]
    assert "1 archival memories" in (forget_result.content or "") and CANARY not in (forget_result.content or "")
    assert files_holding(isolated_home, CANARY) == []
    assert tables_holding(database_url, CANARY) == []
    assert files_holding(isolated_home, KEPT) and tables_holding(database_url, KEPT)
    assert CANARY not in agent.memory.get("human").value
    assert [m.text for m in agent.archival.list()] == [f"The user said: my favourite tea is {KEPT} oolong"]
    tombstones = [m for m in agent.store.messages_after(agent.record.id, 0) if "[forgotten on " in (m.content or "")]
    assert tombstones and all(CANARY not in (m.content or "") for m in agent.store.messages_after(agent.record.id, 0))
    assert all(CANARY not in hit.text for hit in await agent.recall.search(f"home address {CANARY}"))
    assert await agent.recall.search(f"{KEPT} oolong")
    agent.store.engine.dispose()
