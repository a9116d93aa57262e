"""What every agent of a process shares (the embedder and its cache, the vector store, the model endpoint's
connection pool) is one object, however many agents are loaded: a daemon holds thousands."""

from __future__ import annotations

from pagemind.runtime.agent import Agent
from pagemind.runtime.process.settings import Settings
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.specs import build_spec

ENDPOINT = {"name": "m", "base_url": "http://shared.test/v1"}
TOOLS = ["send_message", "archival_memory_insert", "archival_search", "conversation_search"]


async def test_two_loaded_agents_share_the_embedder_the_vector_store_and_the_pool(sqlite_url):
    store, settings = StateStore(make_engine(sqlite_url)), Settings.from_env()
    one, two = [
        await Agent.load(build_spec(name, model=ENDPOINT, tools=TOOLS), store=store, settings=settings)
        for name in ("one", "two")
    ]
    assert one.record.id != two.record.id
    assert one.archival is not None and two.archival is not None
    assert one.recall.embedder is two.recall.embedder is one.archival.embedder is two.archival.embedder
    assert one.archival._open_backend() is two.archival._open_backend()
    assert one.model.client is two.model.client


async def test_another_database_gets_its_own_embedder_cache(tmp_path):
    settings = Settings.from_env()
    stores = [StateStore(make_engine(f"sqlite:///{tmp_path / name}")) for name in ("a.db", "b.db")]
    one, two = [await Agent.load(build_spec("one", tools=TOOLS), store=store, settings=settings) for store in stores]
    assert one.recall.embedder is not two.recall.embedder  # its SQL cache is in its own database
    assert one.recall.embedder.inner is two.recall.embedder.inner  # the model itself is loaded once
