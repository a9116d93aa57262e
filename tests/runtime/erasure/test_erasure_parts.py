"""The parts of a purge on their own: the embedding cache keeps what another agent's text also produced, every
table with an agent_id loses the agent's rows and nobody else's, and an embedded shard rewritten without an agent
(or whose rewrite a kill cut short) keeps every other point."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import numpy as np
import pytest
from sqlalchemy import func, select

from pagemind.runtime.erasure.rows import erase_rows
from pagemind.runtime.memory.embedding.cache import text_hash
from pagemind.runtime.memory.vectors.backend import AgentStore
from pagemind.runtime.memory.vectors.edge import EdgeBackend
from pagemind.runtime.memory.vectors.edge_rewrite import FRESH, RETIRED, recover_rewrite
from pagemind.runtime.memory.vectors.records import MemoryRecord, Sparse, StoredPoint
from pagemind.runtime.memory.vectors.server import ServerBackend
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.state.tables.archival import archival_memories
from pagemind.runtime.state.tables.memory import embedding_cache
from pagemind.runtime.state.tables.schema import metadata
from pagemind.runtime.testing.specs import build_spec

NOW = datetime(2026, 12, 1, tzinfo=UTC)
SHARED, ALONE = "The user likes green tea", "The user's code word is PEACH42"


def memory(agent_id: int, text: str) -> dict[str, object]:
    return {
        "id": str(uuid.uuid4()),
        "agent_id": agent_id,
        "text": text,
        "kind": "fact",
        "importance": 0.5,
        "tags": [],
        "created_at": NOW,
        "updated_at": NOW,
        "hit_count": 0,
        "source_message_ids": [],
        "state": "live",
    }


def test_the_cache_keeps_entries_another_agents_text_produced_and_only_the_agents_rows_go(database_url):
    store = StateStore(make_engine(database_url))
    ours = store.ensure_agent(build_spec().model_copy(update={"name": "ours"})).id
    theirs = store.ensure_agent(build_spec().model_copy(update={"name": "theirs"})).id
    with store.engine.begin() as conn:
        conn.execute(archival_memories.insert(), [memory(ours, SHARED), memory(ours, ALONE), memory(theirs, SHARED)])
        conn.execute(
            embedding_cache.insert(),
            [
                {"model": model, "text_hash": text_hash(t), "dim": 2, "vector": np.zeros(2, np.float32).tobytes()}
                for t in (SHARED, ALONE)
                for model in ("m1", "m2")
            ],
        )
    counts = erase_rows(store.engine, ours)
    assert counts["embedding_cache"] == 2 and counts["archival_memories"] == 2 and counts["agents"] == 1
    with store.engine.connect() as conn:
        left = set(conn.execute(select(embedding_cache.c.model, embedding_cache.c.text_hash)))
        assert left == {("m1", text_hash(SHARED)), ("m2", text_hash(SHARED))}
        for table in metadata.sorted_tables:
            if "agent_id" in table.c:
                assert conn.execute(select(func.count()).where(table.c.agent_id == ours)).scalar() == 0, table.name
        assert conn.execute(select(func.count()).where(archival_memories.c.agent_id == theirs)).scalar() == 1
    assert [a.name for a in store.list_agents()] == ["theirs"]
    assert erase_rows(store.engine, ours) == {}  # again: nothing left, nothing else touched
    store.engine.dispose()


def point(agent_id: int, text: str) -> StoredPoint:
    record = MemoryRecord(id=str(uuid.uuid4()), agent_id=agent_id, text=text, kind="fact", importance=0.5, tags=[],
                          created_at=NOW, updated_at=NOW)  # fmt: skip
    return StoredPoint(record, np.random.default_rng(len(text)).random(8).astype(np.float32), Sparse([1], [1.0]), None)


def shard_bytes_hold(folder, text: str) -> bool:
    return any(text.encode() in p.read_bytes() for p in folder.rglob("*") if p.is_file())


@pytest.mark.parametrize("cut_at", [None, "before_swap", "mid_swap"])
def test_an_edge_shard_rewritten_without_an_agent_keeps_every_other_point(tmp_path, cut_at):
    folder = tmp_path / "qdrant" / "m-8"
    backend = EdgeBackend(folder, 8)
    AgentStore(backend, 1).upsert([point(1, f"ALPHA secret {n}") for n in range(3)])
    AgentStore(backend, 2).upsert([point(2, f"BETA note {n}") for n in range(4)])
    assert backend.delete_agents(["1"]) == 3 and shard_bytes_hold(folder, "ALPHA")  # deleted, still in the files
    backend.compact()
    assert not shard_bytes_hold(folder, "ALPHA") and AgentStore(backend, 2).count() == 4
    backend.close()
    if cut_at is not None:  # a kill during a later rewrite: a half-built new shard, or the old one moved aside
        fresh, retired = folder.with_name(folder.name + FRESH), folder.with_name(folder.name + RETIRED)
        if cut_at == "before_swap":
            fresh.mkdir()
            (fresh / "half-written").write_bytes(b"x")
        else:
            folder.rename(fresh)
            retired.mkdir()
        recover_rewrite(folder)
        assert folder.is_dir() and not fresh.exists() and not retired.exists()
    reopened = EdgeBackend(folder, 8)
    assert AgentStore(reopened, 2).count() == 4 and AgentStore(reopened, 1).count() == 0
    texts = {r.text for r in AgentStore(reopened, 2).all()}
    assert texts == {f"BETA note {n}" for n in range(4)}
    reopened.close()


def test_a_server_collection_loses_the_agents_points_only():
    backend = ServerBackend.connect(":memory:", None, "pagemind_test", 8)
    AgentStore(backend, 1).upsert([point(1, "ALPHA")])
    AgentStore(backend, 2).upsert([point(2, "BETA")])
    assert backend.delete_agents(["1", "old-name"]) == 1
    backend.compact()  # nothing to do: the server's optimizer does it
    assert AgentStore(backend, 1).count() == 0 and AgentStore(backend, 2).count() == 1
    backend.close()


def test_a_vector_store_that_does_not_answer_fails_the_purge_before_anything_is_recorded(sqlite_url, tmp_path):
    from pagemind.runtime.erasure.purge import purge_agents
    from pagemind.runtime.erasure.record import pending
    from pagemind.runtime.memory.vectors.records import StoreError
    from pagemind.runtime.process.settings import Settings

    store = StateStore(make_engine(sqlite_url))
    agent = store.ensure_agent(build_spec().model_copy(update={"name": "kept"}))
    settings = Settings(home=tmp_path, database_url=sqlite_url, qdrant_url="http://127.0.0.1:9")  # nothing listens
    with pytest.raises(StoreError, match="cannot reach the Qdrant server at http://127.0.0.1:9"):
        purge_agents(store.engine, settings, [(agent.id, agent.name)])
    assert pending(store.engine) == [] and [a.name for a in store.list_agents()] == ["kept"]
    store.engine.dispose()
