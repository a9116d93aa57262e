"""Recall search's plumbing made fast (issue 14, item 5) gives what the plain versions gave: the same ids in the
same order. The plain versions are written out here (a matrix product and Python loops; the full-text query joined
as the planner likes), and the fast ones are checked against them; and the catch-up, now one indexed read when
nothing is new, still finds every message stored since, wherever it was stored from."""

from __future__ import annotations

import asyncio
from datetime import timedelta, timezone

import numpy as np
import pytest
from sqlalchemy import text as sql

from pagemind.runtime.memory.recall.indexes import DenseIndex
from pagemind.runtime.memory.recall.memory import RecallService
from pagemind.runtime.memory.retrieval.keywords import query_terms
from pagemind.runtime.messages import Message
from pagemind.runtime.spec.agent import AgentSpec
from pagemind.runtime.spec.memory import ArchivalConfig
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.clock import ManualClock
from pagemind.runtime.testing.embedder import FakeEmbedder
from tests.runtime.memory.archival.test_archival import T0


def _index(n: int, seed: int) -> DenseIndex:
    rng = np.random.default_rng(seed)
    index = DenseIndex(ids=sorted(rng.choice(10 * n, size=n, replace=False).tolist()))
    index.id_array = np.asarray(index.ids, dtype=np.int64)
    unit = lambda m: (m / np.linalg.norm(m, axis=1, keepdims=True)).astype(np.float32)  # noqa: E731
    index.own, index.keyed = unit(rng.normal(size=(n, 32))), unit(rng.normal(size=(n, 32)))
    return index


@pytest.mark.parametrize("seed", range(5))
def test_the_dense_index_scores_and_orders_as_the_plain_loops_did(seed):
    index = _index(300, seed)
    rng = np.random.default_rng(100 + seed)
    vector = index.own[7].copy()  # a query equal to a stored message: its similarity is exactly the best
    own, keyed = index.similarities(vector)
    assert np.allclose(own, index.own @ vector, atol=1e-6) and np.allclose(keyed, index.keyed @ vector, atol=1e-6)
    assert int(np.argmax(own)) == 7
    keyword = {i: float(rng.integers(1, 4)) for i in rng.choice(index.ids, size=60, replace=False).tolist()}
    keyword |= {-5: 9.0, 10**9: 9.0}  # ids the index does not hold (another process's newer messages): ignored
    kw = index.keyword_scores(keyword)
    assert kw.tolist() == [keyword.get(i, 0.0) for i in index.ids]
    fused = np.round(kw + own, 1)  # rounded: many exact ties, which must keep id order
    keep = rng.random(len(fused)) > 0.3
    plain = [(index.ids[n], float(fused[n])) for n in np.argsort(-fused, kind="stable") if keep[n]]
    assert index.ranked(fused, keep) == plain
    assert DenseIndex().keyword_scores({3: 1.0}).tolist() == []


@pytest.fixture
def world(database_url):
    store = StateStore(make_engine(database_url))
    agents = [
        store.ensure_agent(AgentSpec.model_validate({"name": n, "model": {"name": "m"}, "system": "s"})).id
        for n in ("alice", "bob")
    ]
    yield store, agents
    store.engine.dispose()


LINES = [
    "Mei is getting married in Lyon next spring",
    "Will you play the cello at the wedding?",
    "Yes, the cello, at her wedding in Lyon",
    "We adopted a cat called Miso",
    "Miso likes the cello too",
    "The wedding is in May",
    "Lyon is lovely in spring",
]


def _store(store: StateStore, agent: int, lines: list[str], start, in_context: bool = False) -> None:
    store.append_messages(
        agent,
        [
            Message("user" if n % 2 == 0 else "assistant", text, start + timedelta(minutes=n), in_context=in_context)
            for n, text in enumerate(lines)
        ],
    )


def test_the_keyword_query_matches_the_plain_join(world):
    """The SQLite query's join order is forced (see memory.fulltext); Postgres' is its own: same scores."""
    store, (alice, bob) = world
    _store(store, alice, LINES, T0)
    _store(store, bob, LINES[::-1], T0)
    for agent in (alice, bob):
        RecallService(agent, engine=store.engine).catch_up(dense=False)
    service = RecallService(alice, engine=store.engine)
    for query in ("cello wedding", "Lyon spring Miso", "who is getting married", "nothing matches zzz"):
        terms = query_terms(query)
        found = service.fulltext.search(alice, terms, 0.5)
        if store.engine.dialect.name == "sqlite" and terms:
            with store.engine.connect() as conn:
                plain = dict(
                    conn.execute(
                        sql(
                            "SELECT recall_fts.rowid, -bm25(recall_fts, 1.0, 0.5) FROM recall_fts JOIN messages ON "
                            "messages.id = recall_fts.rowid WHERE recall_fts MATCH :q AND messages.agent_id = :a"
                        ),
                        {"q": " OR ".join(f'"{t}"' for t in terms), "a": alice},
                    ).all()
                )
            assert found == plain
        with store.engine.connect() as conn:
            own = {i for (i,) in conn.execute(sql("SELECT id FROM messages WHERE agent_id = :a"), {"a": alice})}
        assert set(found) <= own
        assert bool(found) is (query != "nothing matches zzz")


def test_the_catch_up_finds_every_message_stored_since_in_or_out_of_the_window(world):
    store, (alice, bob) = world
    clock = ManualClock(T0 + timedelta(days=1))
    service = RecallService(alice, engine=store.engine, embedder=FakeEmbedder(), clock=clock)
    _store(store, alice, LINES[:3], T0)
    assert asyncio.run(service.search("Miso")) == []
    _store(store, bob, ["Miso the cat"], T0)  # another agent's message: newer ids, not alice's
    assert asyncio.run(service.search("Miso")) == []
    _store(store, alice, LINES[3:5], T0 + timedelta(hours=1), in_context=True)  # in the window
    assert {h.text for h in asyncio.run(service.search("Miso"))} == set(LINES[3:5])
    other = RecallService(alice, engine=store.engine, embedder=FakeEmbedder(), clock=clock)
    _store(store, alice, ["Miso caught a mouse"], T0 + timedelta(hours=2))
    assert len(asyncio.run(other.search("Miso", mode="bm25"))) == 3  # indexed by another instance (process) ...
    for mode in ("hybrid", "bm25"):  # ... and still found by the first, its dense vectors added
        assert "Miso caught a mouse" in {h.text for h in asyncio.run(service.search("Miso", mode=mode, limit=50))}
    with store.engine.connect() as conn:
        newest = conn.execute(sql("SELECT max(id) FROM messages WHERE agent_id = :a"), {"a": alice}).scalar()
    assert service.indexes.dense.ids[-1] == newest and len(service.indexes.dense.ids) == 6


def test_a_long_catch_up_reports_progress_and_a_new_model_says_it_re_embedded(world, monkeypatch):
    import logging

    import structlog

    from pagemind.runtime.memory.embedding.cache import CachedEmbedder
    from pagemind.runtime.memory.recall import indexes as indexes_module
    from pagemind.runtime.process.logs import configure_logging

    store, (alice, _) = world
    _store(store, alice, LINES[:5], T0)
    monkeypatch.setattr(indexes_module, "_BATCH", 2)
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.INFO))
    try:
        events = {}
        for name, model in (("first", "model-a"), ("cached", "model-a"), ("new model", "model-b")):
            service = RecallService(
                alice, engine=store.engine, embedder=CachedEmbedder(FakeEmbedder(model_id=model), store.engine)
            )
            with structlog.testing.capture_logs() as logs:
                service.catch_up(dense=True)
            events[name] = [
                (e["event"], e.get("done"), e.get("texts"))
                for e in logs
                if e["event"].startswith("recall_") and e["event"] != "recall_indexed"
            ]
            assert len(service.indexes.dense.ids) == 5
    finally:
        configure_logging("WARNING")
    progress = [("recall_embedding_progress", n, None) for n in (2, 4, 5)]
    # 9 texts: each message alone and keyed, and the first message has no context (its two documents are one)
    assert events["first"] == events["new model"] == progress + [("recall_reembedded", None, 9)]
    assert events["cached"] == progress  # read from the SQL cache: nothing re-embedded


def test_a_time_question_reads_its_head_once_and_the_page_filters_it_as_sql_does(world):
    """The time boost reads the rows of the best `prefetch` results; the page takes its hits from those rows
    (filtered in Python) instead of reading them again, the rest with the SQL filters, and gives what reading every
    row with the SQL filters gives."""
    from sqlalchemy import event

    store, (alice, _) = world
    _store(store, alice, LINES, T0 - timedelta(days=40))
    _store(store, alice, LINES[::-1], T0 - timedelta(days=10))
    service = RecallService(alice, engine=store.engine, clock=ManualClock(T0))
    service.catch_up(dense=False)
    statements: list[str] = []
    record = lambda conn, cursor, statement, *rest: statements.append(statement)  # noqa: E731
    event.listen(store.engine, "before_cursor_execute", record)
    try:
        hits = asyncio.run(service.search("the wedding in Lyon last week", mode="bm25", limit=3))
    finally:
        event.remove(store.engine, "before_cursor_execute", record)
    assert len(hits) == 3 and hits[0].time.date() == (T0 - timedelta(days=10)).date()  # the boost lifted last week's
    assert sum(" IN (" in s.upper() for s in statements) == 1  # by id: the head once, no second read for the page
    service = RecallService(alice, engine=store.engine, clock=ManualClock(T0), config=ArchivalConfig(prefetch=5))
    scored, read = service._ranked("the wedding in Lyon last week", None, "bm25")
    assert len(read) == 5 < len(scored)  # the rest of the page is read with the filters in SQL
    edge = T0 - timedelta(days=40, minutes=-2)  # a message's own time: both ends are inclusive
    assert max(h.time for h in service._page(scored, read, ["user"], None, edge, 5, 1)) == edge
    for roles, start, end in [
        (None, None, None),
        (["assistant"], None, None),
        (None, edge, None),
        (["user"], None, edge),
        (None, edge.replace(tzinfo=None), T0 - timedelta(days=10)),
        (None, edge.astimezone(timezone(timedelta(hours=-5))), None),
    ]:
        for page in (1, 2, 3):
            expected = service._page(scored, {}, roles, start, end, 2, page)  # every row read with the SQL filters
            assert service._page(scored, read, roles, start, end, 2, page) == expected
