"""Archival memory at scale (issue 11, item 3): the index both backends build, Edge's own optimizer, group commit
of concurrent inserts, and the SQL reads a search makes. Speed itself is measured by bench/archival_latency.py.
"""

from __future__ import annotations

import json
import threading
from dataclasses import replace
from datetime import timedelta

import numpy as np
import pytest
from sqlalchemy import select

from pagemind.runtime.memory.archival.group_commit import GroupCommit, PendingInsert, group_commit
from pagemind.runtime.memory.archival.ledger_reads import LIVE
from pagemind.runtime.memory.archival.memory import ArchivalService
from pagemind.runtime.memory.vectors.edge import EdgeBackend
from pagemind.runtime.memory.vectors.index import PLAN, IndexPlan
from pagemind.runtime.memory.vectors.records import MemoryFilter, MemoryRecord, Sparse, StoredPoint
from pagemind.runtime.memory.vectors.server import ServerBackend
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.tables.archival import archival_memories
from pagemind.runtime.testing.clock import ManualClock
from pagemind.runtime.testing.embedder import FakeEmbedder
from tests.runtime.memory.archival.test_archival import ALICE, BOB, DIM, T0, run, unit

SMALL = IndexPlan(full_scan_threshold_kb=1, indexing_threshold_kb=4)  # 64-d: exact below 4 points, index at 16


def random_units(count: int, seed: int) -> np.ndarray:
    vectors = np.random.default_rng(seed).standard_normal((count, DIM)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def fill(backend, agent_id: int, vectors: np.ndarray) -> None:
    points = []
    for n, vector in enumerate(vectors):
        at = T0 - timedelta(minutes=n)
        points.append(
            StoredPoint(
                MemoryRecord(agent_id=agent_id, text=f"memory {agent_id}/{n}", created_at=at, updated_at=at),
                vector,
                Sparse([], []),
            )
        )
    backend.upsert(agent_id, points)


def test_the_edge_shard_is_created_with_a_graph_per_agent_and_int8_copies(tmp_path):
    backend = EdgeBackend(tmp_path / "shard", DIM)
    backend.close()
    config = json.loads((tmp_path / "shard" / "edge_config.json").read_text())
    text = json.dumps(config)
    assert '"payload_m": 32' in text and '"m": 0' in text  # no global graph, one per tenant
    assert "int8" in text.lower()
    assert config["payload_memory"] == "cold"  # payloads in RAM only once the shard is large (next tests)
    assert PLAN.exact_below(384) == 1333 and PLAN.indexing_points(384) == 2666


def test_edge_optimizes_on_its_own_once_enough_was_written_and_the_index_finds_what_exact_search_finds(tmp_path):
    backend = EdgeBackend(tmp_path / "shard", DIM, replace(SMALL, payload_in_ram_from=0))
    try:
        fill(backend, ALICE, random_units(200, 1))
        fill(backend, BOB, random_units(200, 2))
        assert backend.optimizer is not None
        backend.optimizer.join()  # the optimization the writes started
        info = backend.shard.info()
        assert info.indexed_vectors_count > 0 and backend._unindexed < 400
        segments = [json.loads(f.read_text())["config"] for f in (tmp_path / "shard").glob("segments/*/segment.json")]
        indexed = [c for c in segments if c["vector_data"]["dense"]["index"]["type"] == "hnsw"]
        assert indexed and all(c["payload_storage_type"]["type"] == "in_ram_mmap" for c in indexed)
        flt = MemoryFilter()
        overlap = []
        for query in random_units(20, 3):
            approx = backend.search_dense(ALICE, query, flt, 10)
            exact = backend.search_dense(ALICE, query, flt, 10, exact=True)
            assert {h.record.agent_id for h in approx} == {ALICE}
            overlap.append(len({h.record.id for h in approx} & {h.record.id for h in exact}) / 10)
        assert np.mean(overlap) >= 0.9
    finally:
        backend.close()


def payload_storage(folder) -> list[str]:
    """Each segment's payload storage as Qdrant Edge wrote it: "mmap" on disk, "in_ram_mmap" in RAM."""
    return [
        json.loads(f.read_text())["config"]["payload_storage_type"]["type"]
        for f in folder.glob("segments/*/segment.json")
    ]


def test_a_shard_keeps_payloads_on_disk_until_it_is_large_then_builds_its_segments_with_them_in_ram(tmp_path):
    folder, plan = tmp_path / "shard", replace(SMALL, payload_in_ram_from=300)
    backend = EdgeBackend(folder, DIM, plan, auto_optimize=False)
    try:
        fill(backend, ALICE, random_units(200, 1))
        backend.optimize()  # 200 points: below the line
        assert set(payload_storage(folder)) == {"mmap"} and not backend._payloads_in_ram
        before = backend.search_dense(ALICE, random_units(1, 9)[0], MemoryFilter(), 5)
        fill(backend, BOB, random_units(200, 2))
        backend.optimize()  # 400: the shard is reopened with payloads in RAM, then the new segments built
        assert backend._payloads_in_ram and "in_ram_mmap" in payload_storage(folder)
        after = backend.search_dense(ALICE, random_units(1, 9)[0], MemoryFilter(), 5)
        assert [(h.record.id, h.record.text, h.score) for h in after] == [
            (h.record.id, h.record.text, h.score) for h in before
        ]
        assert backend.count(ALICE, MemoryFilter()) == 200 and backend.count(BOB, MemoryFilter()) == 200
    finally:
        backend.close()
    reopened = EdgeBackend(folder, DIM, plan, auto_optimize=False)  # the folder remembers the choice
    try:
        assert reopened._payloads_in_ram
    finally:
        reopened.close()
    never = EdgeBackend(tmp_path / "off", DIM, replace(plan, payload_in_ram=False), auto_optimize=False)
    try:
        fill(never, ALICE, random_units(400, 3))
        never.optimize()
        assert set(payload_storage(tmp_path / "off")) == {"mmap"} and not never._payloads_in_ram
    finally:
        never.close()


def test_the_server_collection_is_configured_like_the_edge_shard():
    backend = ServerBackend.connect(":memory:", None, "pagemind_scale", DIM)
    try:
        config = backend.collection_config()
        assert (config["hnsw_config"].m, config["hnsw_config"].payload_m) == (0, PLAN.payload_m)
        assert config["quantization_config"].scalar.type.value == "int8"
        assert config["optimizers_config"].indexing_threshold == PLAN.indexing_threshold_kb
        assert config["on_disk_payload"] is False  # payloads in RAM, as on Edge
        indexes = backend.payload_indexes()
        assert indexes["agent_id"].is_tenant and all(not p.enable_hnsw for k, p in indexes.items() if k != "agent_id")
    finally:
        backend.close()


@pytest.fixture
def world(tmp_path):
    backend = EdgeBackend(tmp_path / "shard", DIM)
    engine = make_engine(f"sqlite:///{tmp_path / 'state.db'}")

    def service(agent_id: int) -> ArchivalService:
        return ArchivalService(
            agent_id, engine=engine, open_backend=lambda: backend, embedder=FakeEmbedder(), clock=ManualClock(T0)
        )

    yield backend, service
    backend.close()


def pending(svc: ArchivalService, text: str, vector: np.ndarray) -> PendingInsert:
    record = MemoryRecord(agent_id=svc.agent_id, text=text, created_at=T0, updated_at=T0)
    [point] = svc.store.owned([StoredPoint(record, vector, Sparse([], []))])
    return PendingInsert(svc.ledger, svc.store, point, None, None, {})


def test_queued_inserts_of_several_agents_are_written_as_one_batch(world):
    backend, service = world
    alice, bob = service(ALICE), service(BOB)
    commit = GroupCommit(backend)
    writes = []
    original = backend.upsert_all
    backend.upsert_all = lambda points: (writes.append(points), original(points))[1]
    queued = [pending(alice, "Lin lives in Lyon", unit(1)), pending(bob, "Bob plays chess", unit(0, 1))]
    commit._queue.extend(queued)  # as if they arrived while another batch was being written
    last = pending(alice, "Lin plays the cello", unit(0, 0, 1))
    commit.insert(last)
    assert (commit.batches, commit.inserts) == (1, 3) and len(writes) == 1
    assert all(job.future.result() is True for job in [*queued, last])
    assert sorted(m.text for m in alice.list()) == ["Lin lives in Lyon", "Lin plays the cello"]
    assert [m.text for m in bob.list()] == ["Bob plays chess"] and len(bob.store.ids()) == 1


def test_one_bad_insert_fails_alone(world):
    backend, service = world
    alice = service(ALICE)
    run(alice.insert("Lin lives in Lyon"))
    [live] = alice.list()
    commit = GroupCommit(backend)
    again = pending(alice, "Lin lives in Lyon", unit(1))  # the same derived id as a live row: the insert fails
    assert again.record.id == live.id
    commit._queue.append(again)
    good = pending(alice, "Lin drinks tea", unit(0, 1))
    commit.insert(good)
    assert good.future.result() is True
    with pytest.raises(Exception):
        again.future.result()
    assert sorted(m.text for m in alice.list()) == ["Lin drinks tea", "Lin lives in Lyon"]
    assert alice.ledger.rows(unsettled=True) == []


def test_concurrent_inserts_share_the_process_group_commit_and_each_is_live_when_answered(world):
    backend, service = world
    agents = [service(10 + n) for n in range(6)]
    for agent in agents:
        assert agent.store is not None  # opened (and reconciled) before the race
    start = threading.Barrier(len(agents))
    answered: list[tuple[ArchivalService, str]] = []

    def write(agent: ArchivalService) -> None:
        start.wait()
        result = run(agent.insert(f"agent {agent.agent_id} likes tea"))
        with agent.engine.connect() as conn:  # answered: the row is live, and the point is there
            state = conn.execute(select(archival_memories.c.state).where(archival_memories.c.id == result.id)).scalar()
        answered.append((agent, state))
        assert result.id in agent.store.ids()

    threads = [threading.Thread(target=write, args=(a,)) for a in agents]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(state for _, state in answered) == [LIVE] * len(agents)
    commit = group_commit(backend)
    assert commit.inserts == len(agents) and commit.batches <= len(agents)


def test_the_reads_that_name_ids_find_rows_by_primary_key(tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'state.db'}")
    svc = ArchivalService(ALICE, engine=engine, open_backend=lambda: None, embedder=FakeEmbedder())
    ids = [f"{n:036d}" for n in range(100)]  # a search's candidates (SQLite picks the agent's index for these)
    query = select(archival_memories.c.id).where(
        svc.ledger._by_id, archival_memories.c.id.in_(ids), archival_memories.c.state == LIVE
    )
    with engine.connect() as conn:
        plan = conn.exec_driver_sql(
            "EXPLAIN QUERY PLAN " + str(query.compile(engine, compile_kwargs={"literal_binds": True}))
        ).all()
    assert "ix_archival_memories_agent_id" not in str(plan), plan  # not the agent's whole index


def test_a_searchs_live_check_on_sqlite_reads_by_primary_key_and_passes_only_this_agents_live_rows(tmp_path):
    from pagemind.runtime.memory.archival.ledger_reads import LIVE_IDS_SQLITE

    engine = make_engine(f"sqlite:///{tmp_path / 'state.db'}")
    with engine.connect() as conn:
        plan = conn.exec_driver_sql(
            "EXPLAIN QUERY PLAN " + LIVE_IDS_SQLITE.text.replace(":ids", "'[]'").replace(":agent_id", "1")
        ).all()
    assert "sqlite_autoindex_archival_memories_1 (id=?)" in str(plan), plan
    assert "ix_archival_memories_agent_id" not in str(plan), plan
    rows = [
        {
            "id": f"m{n}",
            "agent_id": agent,
            "text": "x",
            "kind": "fact",
            "importance": 0.5,
            "tags": [],
            "created_at": T0,
            "updated_at": T0,
            "source_message_ids": [],
            "state": state,
            "superseded_by": by,
        }
        for n, (agent, state, by) in enumerate(
            [
                (ALICE, LIVE, None),
                (ALICE, "inserting", None),
                (ALICE, LIVE, "m0"),
                (BOB, LIVE, None),
                (ALICE, "forgetting", None),
            ]
        )
    ]
    with engine.begin() as conn:
        conn.execute(archival_memories.insert(), rows)
    svc = ArchivalService(ALICE, engine=engine, open_backend=lambda: None, embedder=FakeEmbedder())
    assert svc.ledger.live_ids([f"m{n}" for n in range(5)] + ["m0", "missing", "it's"]) == {"m0"}


def test_an_inserted_memorys_embedding_is_cached_with_its_row_and_a_query_is_not(world, tmp_path):
    from pagemind.runtime.memory.embedding.cache import CachedEmbedder, text_hash
    from pagemind.runtime.state.tables.memory import embedding_cache

    backend, _ = world
    engine = make_engine(f"sqlite:///{tmp_path / 'cache.db'}")
    embedder = CachedEmbedder(FakeEmbedder(), engine)
    svc = ArchivalService(ALICE, engine=engine, open_backend=lambda: backend, embedder=embedder, clock=ManualClock(T0))
    run(svc.insert("Lin lives in Lyon"))
    run(svc.search("where does Lin live", count_hits=False))
    with engine.connect() as conn:
        cached = conn.execute(select(embedding_cache.c.text_hash)).scalars().all()
    assert cached == [text_hash("Lin lives in Lyon")]  # the query's vector stayed in the process
    again = CachedEmbedder(FakeEmbedder(), engine)  # a new process: the memory's vector comes from SQL
    again.embed(["Lin lives in Lyon"])
    assert again.computed == 0


def test_a_server_collection_made_before_the_per_agent_index_is_given_it():
    from types import SimpleNamespace

    class OldServer:  # a collection created with Qdrant's defaults (one global graph, no quantization)
        def __init__(self):
            self.updates, self.indexes = [], []

        def collection_exists(self, name):
            return True

        def get_collection(self, name):
            return SimpleNamespace(
                config=SimpleNamespace(hnsw_config=SimpleNamespace(m=16, payload_m=None), quantization_config=None)
            )

        def update_collection(self, name, **changes):
            self.updates.append(changes)

        def create_payload_index(self, name, key, params):
            self.indexes.append((key, params))

    client = OldServer()
    ServerBackend(client, "pagemind_old", DIM, "http://qdrant:6333")
    [changes] = client.updates
    assert (changes["hnsw_config"].m, changes["hnsw_config"].payload_m) == (0, PLAN.payload_m)
    assert changes["quantization_config"] is not None
    assert dict(client.indexes)["agent_id"].is_tenant


def test_a_searchs_hits_are_written_to_the_store_once_per_distinct_count(world):
    backend, service = world
    svc = service(ALICE)
    ids = [run(svc.insert(f"Lin's garden note {n}: tomatoes and beans")).id for n in range(4)]
    run(svc.search("garden tomatoes", top_k=3))  # three of them get their first hit
    writes = []
    original = backend.set_payloads
    backend.set_payloads = lambda agent_id, memory_ids, fields: (
        writes.append(sorted(memory_ids)),
        original(agent_id, memory_ids, fields),
    )[1]
    found = run(svc.search("garden tomatoes", top_k=4))
    assert len(found) == 4 and len(writes) == 2  # the three hit before (count 2) in one write, the other (1) alone
    counts = {r.id: r.hit_count for r in svc.store.get(ids)}
    assert sorted(counts.values()) == [1, 2, 2, 2] and counts == {r.id: r.hit_count for r in svc.list()}
    assert sorted(len(w) for w in writes) == [1, 3]


def test_the_write_paths_neighbour_lookup_takes_a_shorter_walk_than_a_search(world):
    backend, service = world
    svc = service(ALICE)
    walks = []
    original = backend.search_dense
    backend.search_dense = lambda *args, **kwargs: (
        walks.append(args[5] if len(args) > 5 else kwargs.get("ef")),
        original(*args, **kwargs),
    )[1]
    run(svc.insert("Lin lives in Lyon"))
    again = run(svc.insert("Lin lives in Lyon"))  # the neighbour lookup still finds the copy
    assert again.action == "duplicate" and walks == [PLAN.neighbour_ef] * 2 and PLAN.neighbour_ef < PLAN.hnsw_ef


def keyword_points(backend, agent_id: int, vectors: np.ndarray) -> None:
    """Points with a dense vector and one of five keyword terms each (term n % 5), plus one of their own."""
    backend.upsert(
        agent_id,
        [
            StoredPoint(
                MemoryRecord(
                    agent_id=agent_id,
                    text=f"note {agent_id}/{n}",
                    created_at=T0 - timedelta(minutes=n),
                    updated_at=T0 - timedelta(minutes=n),
                ),
                vector,
                Sparse([n % 5, 100 + n], [1.0, 0.5]),
            )
            for n, vector in enumerate(vectors)
        ],
    )


def test_edges_hybrid_search_answers_as_its_two_searches_with_each_keyword_hits_exact_cosine(tmp_path):
    backend = EdgeBackend(tmp_path / "shard", DIM)
    try:
        vectors = random_units(120, 3)
        keyword_points(backend, ALICE, vectors)
        keyword_points(backend, BOB, vectors)  # the same vectors and terms under another agent: never returned
        terms, flt = Sparse([1], [1.0]), MemoryFilter(live_at=T0)
        first = backend.search_sparse(ALICE, terms, flt, 10)[0].record.text  # the query lies on a keyword hit
        query = vectors[int(first.rsplit("/", 1)[1])]
        dense, keyword = backend.search_hybrid(ALICE, query, terms, flt, 10)
        assert [(h.record, h.score) for h in dense] == [
            (h.record, h.score) for h in backend.search_dense(ALICE, query, flt, 10)
        ]
        assert [(h.record, h.score) for h in keyword] == [
            (h.record, h.score) for h in backend.search_sparse(ALICE, terms, flt, 10)
        ]
        exact = backend.search_dense(ALICE, query, MemoryFilter(ids=[h.record.id for h in keyword]), 10, exact=True)
        assert {h.record.id: h.cosine for h in keyword} == pytest.approx({h.record.id: h.score for h in exact})
        both = {h.record.id for h in dense} & {h.record.id for h in keyword}
        assert both and len(both) < len(keyword)  # some cosines come from the dense side, the others scored after
        assert {h.record.agent_id for h in [*dense, *keyword]} == {ALICE}
        assert backend.search_hybrid(ALICE, None, terms, flt, 10)[1][0].cosine is None  # no dense query: no cosine
    finally:
        backend.close()


def test_a_keyword_hit_forgotten_while_the_hybrid_search_runs_is_left_out(tmp_path):
    backend = EdgeBackend(tmp_path / "shard", DIM)
    try:
        keyword_points(backend, ALICE, random_units(60, 4))
        shard, gone = backend.shard, []

        class ForgetsAfterTheBatch:  # another writer deletes a keyword-only hit between the two store calls
            def __getattr__(self, name):
                return getattr(shard, name)

            def query_batch(self, request):
                dense, keyword = shard.query_batch(request)
                gone.append(next(p.id for p in keyword if p.id not in {d.id for d in dense}))
                shard.update(
                    backend.qe.UpdateOperation.delete_points_by_filter(
                        backend.qe.Filter(must=[backend.qe.HasIdCondition({gone[0]})])
                    )
                )
                return [dense, keyword]

        backend.shard = ForgetsAfterTheBatch()
        _, keyword = backend.search_hybrid(ALICE, random_units(1, 5)[0], Sparse([2], [1.0]), MemoryFilter(), 10)
        backend.shard = shard
        assert gone and str(gone[0]) not in {h.record.id for h in keyword} and len(keyword) == 9
        assert all(h.cosine is not None for h in keyword)
    finally:
        backend.close()
