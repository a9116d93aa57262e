"""Archival memory: the write path (dating, dedupe, supersede), hybrid search, isolation, the two Qdrant adapters.

Unit tests use `FakeEmbedder` (pagemind.runtime.testing.embedder), whose vectors are chosen by the test, so cosine similarities sit exactly where a
test needs them (just above or below a threshold). Tests with the real shipped model are marked as such.
"""

from __future__ import annotations

import asyncio
import json
import threading
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from pagemind.runtime.memory.archival.memory import ArchivalService
from pagemind.runtime.memory.archival.write_policy import conflicts, decide, normalise_text
from pagemind.runtime.memory.vectors.backend import AgentStore
from pagemind.runtime.memory.vectors.edge import EdgeBackend
from pagemind.runtime.memory.vectors.records import Hit, MemoryRecord
from pagemind.runtime.memory.vectors.server import ServerBackend
from pagemind.runtime.spec.memory import ArchivalConfig
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.testing.clock import ManualClock
from pagemind.runtime.testing.embedder import FakeEmbedder
from pagemind.runtime.testing.step_context import tool_context
from pagemind.tools import BUILTIN_TOOLS, ToolCall, dispatch_tool_calls

DIM = FakeEmbedder.dim
T0 = datetime(2026, 11, 29, 15, 0, tzinfo=UTC)
ALICE, BOB, MALLORY = 1, 2, 3  # agent ids: archival memory is keyed by the agent's id


def unit(*weights: float) -> np.ndarray:
    """A unit vector from leading coordinates (the rest zero)."""
    v = np.zeros(DIM, dtype=np.float32)
    v[: len(weights)] = weights
    return v / np.linalg.norm(v)


def at_cosine(base: np.ndarray, cos: float, axis: int) -> np.ndarray:
    """A unit vector whose cosine with the unit vector `base` is exactly `cos` (tilted towards `axis`)."""
    other = np.zeros(DIM, dtype=np.float32)
    other[axis] = 1.0
    other -= (other @ base) * base
    other /= np.linalg.norm(other)
    return (cos * base + np.sqrt(1 - cos * cos) * other).astype(np.float32)


@pytest.fixture(params=["edge", "server"])
def backend(request, tmp_path):
    """Both adapters: Qdrant Edge on disk, and qdrant-client (local in-memory mode standing in for a server)."""
    if request.param == "edge":
        b = EdgeBackend(tmp_path / "qdrant", DIM)
    else:
        b = ServerBackend.connect(":memory:", None, "pagemind_test", DIM)
    yield b
    b.close()


@pytest.fixture
def make_service(backend, tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'state.db'}")

    def make(
        agent: int = ALICE, embedder: FakeEmbedder | None = None, clock: ManualClock | None = None, **config
    ) -> ArchivalService:
        return ArchivalService(
            agent,
            engine=engine,
            open_backend=lambda: backend,
            embedder=embedder or FakeEmbedder(),
            config=ArchivalConfig(**config),
            clock=clock or ManualClock(T0),
        )

    return make


def run(coro):
    return asyncio.run(coro)


# -- write path -------------------------------------------------------------------------------------------------


def test_relative_dates_are_made_absolute_against_the_write_time():
    text = normalise_text("  Started   yoga  today; my sister visited last week and recently moved.", T0)
    assert text == (
        "Started yoga today (2026-11-29); my sister visited last week (week of 2026-11-16) and "
        "recently (as of 2026-11-29) moved."
    )
    assert normalise_text(text, T0 + timedelta(days=40)) == text  # already dated: left alone


@pytest.mark.parametrize(
    "new, old, expected",
    [
        ("Lin's favourite colour is green", "Lin's favourite colour is blue", True),
        ("Lin is not vegetarian", "Lin is vegetarian", True),
        ("The meeting is at 4pm", "The meeting is at 3 pm", True),
        ("The user likes green tea.", "User likes green tea", False),
        ("User likes green tea, especially sencha", "User likes green tea", False),
    ],
)
def test_conflict_detection(new, old, expected):
    assert conflicts(new, old) is expected


def test_decision_table():
    config = ArchivalConfig()
    record = MemoryRecord(agent_id=ALICE, text="User likes green tea", created_at=T0, updated_at=T0)
    assert decide("The user likes green tea.", None, config).action == "insert"
    assert decide("The user likes green tea.", Hit(record, 0.921), config).action == "duplicate"
    assert decide("The user likes green tea.", Hit(record, 0.919), config).action == "insert"
    assert decide("User likes black coffee", Hit(record, 0.85), config).action == "supersede"
    assert decide("User likes black coffee", Hit(record, 0.79), config).action == "insert"
    episode = record.model_copy(update={"kind": "episode"})
    assert decide("User drank black coffee", Hit(episode, 0.85), config).action == "insert"
    chinese = record.model_copy(update={"text": "我不喝咖啡，只喝绿茶。"})  # MiniLM: cosine 0.97, no word shared
    assert decide("我对猫毛过敏，所以不能养猫。", Hit(chinese, 0.973), config).action == "insert"
    assert decide("我不喝咖啡，只喝红茶。", Hit(chinese, 0.95), config).action == "supersede"


@pytest.mark.parametrize("cos, copies", [(0.921, 1), (0.919, 2)])
def test_dedupe_just_above_and_below_the_threshold(make_service, cos, copies):
    first = unit(1)
    embedder = FakeEmbedder({"User likes green tea": first, "The user likes green tea.": at_cosine(first, cos, 1)})
    service = make_service(embedder=embedder)
    a = run(service.insert("User likes green tea", tags=["drinks"]))
    b = run(service.insert("The user likes green tea.", tags=["tea"], importance=0.9))
    assert service.stats()[0] == copies
    if copies == 1:
        assert (b.action, b.id) == ("duplicate", a.id)
        [memory] = service.list()
        assert memory.tags == ["drinks", "tea"] and memory.importance == 0.9 and memory.hit_count == 1
        assert [v.operation for v in service.history(a.id)] == ["insert", "refresh"]
        assert service.history(a.id)[1].detail["duplicate_text"] == "The user likes green tea."
        assert service.store.get([a.id])[0].tags == ["drinks", "tea"]
    else:
        assert b.action == "inserted" and b.id != a.id


def test_dedupe_only_within_the_same_kind(make_service):
    v = unit(1)
    service = make_service(embedder=FakeEmbedder({"Call mum on Sunday": v}))
    run(service.insert("Call mum on Sunday", kind="todo"))
    run(service.insert("Call mum on Sunday", kind="fact"))
    assert service.stats()[0] == 2


def test_supersede_keeps_history_and_leaves_default_results(make_service):
    blue = unit(1)
    embedder = FakeEmbedder(
        {
            "Lin's favourite colour is blue": blue,
            "Lin's favourite colour is green": at_cosine(blue, 0.9, 1),
            "favourite colour": at_cosine(blue, 0.8, 2),
        }
    )
    clock = ManualClock(T0)
    service = make_service(embedder=embedder, clock=clock)
    old = run(service.insert("Lin's favourite colour is blue"))
    clock.now += timedelta(days=3)
    new = run(service.insert("Lin's favourite colour is green"))
    assert (new.action, new.other_id) == ("superseded", old.id)
    assert [h.text for h in run(service.search("favourite colour"))] == ["Lin's favourite colour is green"]
    assert [m.id for m in service.list()] == [new.id]
    superseded = {m.id: m for m in service.list(include_superseded=True)}[old.id]
    assert superseded.superseded_by == new.id and superseded.text == "Lin's favourite colour is blue"
    [insert, mark] = service.history(old.id)
    assert (insert.operation, mark.operation, mark.detail["superseded_by"]) == ("insert", "superseded", new.id)
    assert service.store.get([old.id])[0].superseded_by == new.id
    assert service.stats()[0] == 1


def test_expired_memories_are_out_of_default_results(make_service):
    v = unit(1)
    embedder = FakeEmbedder({"Dentist appointment on Friday": v, "dentist": v})
    clock = ManualClock(T0)
    service = make_service(embedder=embedder, clock=clock)
    run(service.insert("Dentist appointment on Friday", kind="todo", expires_at=T0 + timedelta(days=2)))
    assert len(run(service.search("dentist"))) == 1
    clock.now = T0 + timedelta(days=3)
    service._stats = None
    assert run(service.search("dentist")) == [] and service.stats()[0] == 0


def test_search_date_filters_and_tags(make_service):
    v = unit(1)
    texts = ["Went hiking in the Alps", "Went hiking in the Vosges", "Went hiking in the Jura"]
    embedder = FakeEmbedder({t: at_cosine(v, 0.9, i + 1) for i, t in enumerate(texts)} | {"hiking": v})
    clock = ManualClock(T0)
    service = make_service(embedder=embedder, clock=clock)
    for day, text in enumerate(texts):
        clock.now = T0 + timedelta(days=day)
        run(service.insert(text, kind="episode", tags=["trip", f"day{day}"]))
    found = run(service.search("hiking", start_date=T0 + timedelta(hours=12), end_date=T0 + timedelta(days=1, hours=1)))
    assert [h.text for h in found] == ["Went hiking in the Vosges"]
    assert [h.text for h in run(service.search("hiking", tags=["day2"]))] == ["Went hiking in the Jura"]
    assert len(run(service.search("hiking", tags=["trip"]))) == 3


def test_min_score_returns_nothing_for_an_unrelated_query(make_service):
    embedder = FakeEmbedder({"Lin is allergic to peanuts": unit(1), "quantum chromodynamics on a lattice": unit(0, 1)})
    service = make_service(embedder=embedder)
    run(service.insert("Lin is allergic to peanuts"))
    assert run(service.search("quantum chromodynamics on a lattice")) == []
    assert len(run(service.search("peanuts"))) == 1  # a keyword match is evidence on its own


def test_paging_covers_every_match_once(make_service):
    v = unit(1)
    texts = [f"Note {n}: the garden needs watering" for n in range(7)]
    embedder = FakeEmbedder({t: at_cosine(v, 0.6 + 0.01 * n, n + 1) for n, t in enumerate(texts)} | {"garden": v})
    service = make_service(embedder=embedder)
    for text in texts:
        run(service.insert(text))
    pages = [run(service.search("garden", top_k=3, page=p, count_hits=False)) for p in (1, 2, 3, 4)]
    assert [len(p) for p in pages] == [3, 3, 1, 0]
    assert sorted(h.text for p in pages for h in p) == sorted(texts)
    scores = [h.score for p in pages for h in p]
    assert scores == sorted(scores, reverse=True)


def test_hits_are_counted_and_stats_follow_writes(make_service):
    v = unit(1)
    service = make_service(embedder=FakeEmbedder({"Lin plays the cello": v, "cello": v}))
    assert service.stats() == (0, ())
    memory = run(service.insert("Lin plays the cello", tags=["Music", "hobby"]))
    assert service.stats() == (1, ("hobby", "music"))
    run(service.search("cello"))
    run(service.search("cello"))
    assert service.store.get([memory.id])[0].hit_count == 2 and service.list()[0].hit_count == 2


def test_importance_and_recency_order_equal_matches(make_service):
    v = unit(1)
    embedder = FakeEmbedder(
        {"Likes jazz records": at_cosine(v, 0.7, 1), "Likes jazz concerts": at_cosine(v, 0.7, 2), "jazz": v}
    )
    service = make_service(embedder=embedder)
    run(service.insert("Likes jazz records", importance=0.2))
    run(service.insert("Likes jazz concerts", importance=0.9))
    assert [h.text for h in run(service.search("jazz"))][0] == "Likes jazz concerts"


def test_forget_deletes_from_the_vector_store_and_sql(make_service):
    service = make_service()
    memory = run(service.insert("Lin's old address is 4 Rue Victor Hugo", tags=["address"]))
    assert run(service.forget(memory.id))
    assert service.store.get([memory.id]) == [] and service.list(include_superseded=True) == []
    assert service.history(memory.id) == [] and service.stats() == (0, ())


# -- isolation --------------------------------------------------------------------------------------------------


def test_isolation_in_the_store_layer(make_service, backend):
    v = unit(1)
    embedder = FakeEmbedder({"Alice's secret: the safe code is 4521": v, "safe code": v})
    alice, bob = make_service(ALICE, embedder), make_service(BOB, embedder)
    secret = run(alice.insert("Alice's secret: the safe code is 4521"))
    assert run(bob.search("safe code")) == [] and bob.stats() == (0, ())
    assert bob.store.get([secret.id]) == [] and bob.store.dense_vectors([secret.id]) == {}
    bob.store.delete([secret.id])
    bob.store.set_payload(secret.id, {"text": "overwritten", "agent_id": BOB})
    assert alice.store.get([secret.id])[0].text == "Alice's secret: the safe code is 4521"
    assert run(bob.forget(secret.id)) is False and len(run(alice.search("safe code"))) == 1
    # A record claiming another owner is written as the caller's own.
    AgentStore(backend, BOB).upsert([])
    assert AgentStore(backend, MALLORY).count() == 0


def test_a_tool_argument_naming_another_agent_cannot_widen_the_scope(make_service):
    v = unit(1)
    embedder = FakeEmbedder({"Alice's secret: the safe code is 4521": v, "alice safe code": v})
    alice, bob = make_service(ALICE, embedder), make_service(BOB, embedder)
    run(alice.insert("Alice's secret: the safe code is 4521", tags=["alice"]))
    calls = [
        ToolCall("1", "archival_search", json.dumps({"query": "alice safe code", "agent": "alice"})),
        ToolCall("2", "archival_search", json.dumps({"query": "alice safe code", "tags": ["alice"]})),
        ToolCall("3", "archival_search", json.dumps({"query": "agent_id:alice safe code"})),
    ]
    results = run(dispatch_tool_calls(calls, BUILTIN_TOOLS, tool_context("bob", archival=bob, clock=ManualClock(T0))))
    assert results[0].is_error and "agent: Extra inputs are not permitted" in results[0].content
    assert all("4521" not in r.content for r in results)
    assert results[1].content.startswith("No archival memories")


# -- tools ------------------------------------------------------------------------------------------------------


def test_tools_insert_search_and_report(make_service):
    v = unit(1)
    embedder = FakeEmbedder({"Lin started a new job yesterday (2026-11-28)": v, "new job": v})
    context = tool_context("alice", archival=make_service(ALICE, embedder), clock=ManualClock(T0))
    calls = [
        ToolCall(
            "1",
            "archival_memory_insert",
            json.dumps({"content": "Lin started a new job yesterday", "tags": ["work", "progress"], "importance": 0.8}),
        ),
        ToolCall("2", "archival_search", json.dumps({"query": "new job"})),
        ToolCall("3", "archival_memory_insert", json.dumps({"content": "   "})),
        ToolCall("4", "archival_memory_insert", json.dumps({"content": "x", "importance": 3})),
    ]
    saved, found, empty, bad = run(dispatch_tool_calls(calls, BUILTIN_TOOLS, context))
    assert not saved.is_error and "(progress): Lin started a new job yesterday (2026-11-28)" in saved.content
    assert "[2026-11-29] (progress, score" in found.content and "new job yesterday (2026-11-28)" in found.content
    assert empty.is_error and "empty" in empty.content
    assert bad.is_error and "importance must be between 0 and 1" in bad.content
    assert {t: BUILTIN_TOOLS[t].read_only for t in ("archival_memory_insert", "archival_search")} == {
        "archival_memory_insert": False,
        "archival_search": True,
    }


def test_two_searches_in_one_step_run_concurrently(make_service):
    embedder = FakeEmbedder()
    service = make_service(ALICE, embedder)
    run(service.insert("Lin plays the cello"))  # something to search (an empty memory answers without embedding)
    embedder.barrier = threading.Barrier(2)
    context = tool_context("alice", archival=service, clock=ManualClock(T0))
    calls = [ToolCall("1", "archival_search", '{"query": "one"}'), ToolCall("2", "archival_search", '{"query": "two"}')]
    # Each search embeds its query in a worker thread; the barrier only opens if both are in flight together.
    results = run(dispatch_tool_calls(calls, BUILTIN_TOOLS, context))
    assert [r.is_error for r in results] == [False, False] and embedder.barrier.n_waiting == 0
    assert not embedder.barrier.broken


def test_concurrent_inserts_of_the_same_fact_store_one(make_service):
    v = unit(1)
    service = make_service(embedder=FakeEmbedder({"Lin's cat is called Miso": v}))

    async def both():
        return await asyncio.gather(
            service.insert("Lin's cat is called Miso"), service.insert("Lin's cat is called Miso")
        )

    actions = sorted(r.action for r in run(both()))
    assert actions == ["duplicate", "inserted"] and service.stats()[0] == 1


def test_write_path_and_history_on_every_database(database_url, tmp_path):
    """The SQL half (metadata, versions, statistics, forget) on SQLite and PostgreSQL."""
    backend = EdgeBackend(tmp_path / "qdrant", DIM)
    try:
        blue = unit(1)
        embedder = FakeEmbedder(
            {"Lin's favourite colour is blue": blue, "Lin's favourite colour is green": at_cosine(blue, 0.9, 1)}
        )
        service = ArchivalService(
            ALICE,
            engine=make_engine(database_url),
            open_backend=lambda: backend,
            embedder=embedder,
            clock=ManualClock(T0),
        )
        old = run(service.insert("Lin's favourite colour is blue", tags=["colour"]))
        new = run(service.insert("Lin's favourite colour is green", tags=["colour"]))
        assert service.stats() == (1, ("colour",))
        assert [v.operation for v in service.history(old.id)] == ["insert", "superseded"]
        assert {m.id: m.superseded_by for m in service.list(include_superseded=True)} == {old.id: new.id, new.id: None}
        assert service.list()[0].created_at == T0 and service.resolve_id(new.id[:8]) == new.id
        assert service.resolve_id("%") is None and service.resolve_id("") is None and service.resolve_id("_") is None
        assert run(service.forget(new.id)) and service.stats() == (0, ())
    finally:
        backend.close()


def test_ranking_factors():
    from pagemind.runtime.memory.retrieval.ranking import beats_noise, fuse, importance_factor, recency, usefulness

    assert recency(T0, T0, 0.1, 180) == 1.0 and recency(T0 - timedelta(days=180), T0, 0.1, 180) == pytest.approx(0.95)
    assert importance_factor(0.5, 0.2) == 1.0 and importance_factor(1.0, 0.2) == pytest.approx(1.1)
    assert usefulness(0, 0.05) == 1.0 and usefulness(9, 0.05) > usefulness(1, 0.05) > 1.0
    assert usefulness(9, 0.05, T0 - timedelta(days=360), T0) < usefulness(9, 0.05, T0, T0)
    assert list(fuse(np.array([2.0, 0.0]), np.array([0.5, 1.0]), 0.5)) == [0.75, 0.5]
    assert list(beats_noise(np.array([0.0, 1.2, 0.0]), np.array([0.1, 0.1, 0.35]), 0.0, 0.3)) == [False, True, True]


def test_the_services_meet_the_typed_protocols_tools_see(make_service, tmp_path):
    from pagemind.runtime.memory.recall.memory import RecallService
    from pagemind.tools.context import ArchivalHit, ArchivalMemory, InsertResult, RecallHit, RecallMemory

    service = make_service(embedder=FakeEmbedder({"Lin likes tea": unit(1, 0), "tea": unit(1, 0)}))
    assert isinstance(service, ArchivalMemory)
    inserted = asyncio.run(service.insert("Lin likes tea"))
    hits = asyncio.run(service.search("tea"))
    assert isinstance(inserted, InsertResult) and inserted.action == "inserted"
    assert [type(h) for h in hits] == [ArchivalHit] and hits[0].id == inserted.id

    from pagemind.runtime.messages import Message
    from pagemind.runtime.state.store import StateStore
    from pagemind.runtime.testing.specs import build_spec

    store = StateStore(make_engine(f"sqlite:///{tmp_path / 'recall.db'}"))
    agent = store.ensure_agent(build_spec())
    store.append_messages(agent.id, [Message("user", "I drink green tea every morning", T0)])
    recall = RecallService(agent.id, engine=store.engine)
    assert isinstance(recall, RecallMemory)
    found = asyncio.run(recall.search("green tea"))
    assert [type(h) for h in found] == [RecallHit] and found[0].text.endswith("I drink green tea every morning")
