"""Keyword search over Chinese text (CJK character bigrams, `memory.keywords`) on SQLite and PostgreSQL: recall's
full-text index (FTS5 / tsvector) and archival's BM25 side, with the dense side switched off, so what is found is
found by the words alone."""

from __future__ import annotations

import asyncio

import pytest

from pagemind.runtime.memory.archival.memory import ArchivalService
from pagemind.runtime.memory.recall.memory import RecallService
from pagemind.runtime.memory.retrieval.keywords import query_terms, terms
from pagemind.runtime.memory.vectors.edge import EdgeBackend
from pagemind.runtime.messages import Message
from pagemind.runtime.spec.agent import AgentSpec
from pagemind.runtime.spec.memory import ArchivalConfig
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.clock import ManualClock
from pagemind.runtime.testing.embedder import FakeEmbedder
from tests.runtime.memory.archival.test_archival import T0

TEXTS = [
    "我对花生过敏，一吃就起疹子。",
    "我下个月要搬到上海去工作。",
    "我女儿今年刚上小学一年级。",
    "我在Google做产品经理。",
    "上海的天气最近很潮湿。",
    "我每天早上跑步五公里。",
]
# query → the text that must come first (the query shares a word, two characters or more, with it)
QUERIES = {"花生过敏": 0, "搬到上海工作": 1, "女儿几年级": 2, "google 产品经理": 3, "跑步多少公里": 5}


def test_bigrams_make_words_of_chinese_and_keep_latin_words_whole():
    assert terms("搬到上海") == ["搬到", "到上", "上海"]
    assert terms("我在Google做产品经理") == [
        "我在",
        "googl",
        "做产",
        "产品",
        "品经",
        "经理",
    ]  # was 我在 / google做产品经理
    assert query_terms("上海、上海") == ["上海"]


@pytest.fixture
def store(database_url):
    return StateStore(make_engine(database_url))


def test_recall_finds_chinese_messages_by_shared_words(store):
    record = store.ensure_agent(AgentSpec.model_validate({"name": "lin", "model": {"name": "m"}, "system": "s"}))
    stored = store.append_messages(record.id, [Message("user", t, T0, in_context=False) for t in TEXTS])
    recall = RecallService(
        record.id, engine=store.engine, embedder=None, config=ArchivalConfig(), clock=ManualClock(T0)
    )
    for query, index in QUERIES.items():
        hits = asyncio.run(recall.search(query, limit=3, mode="bm25"))
        assert hits and hits[0].id == stored[index].id, query
    shanghai = [h.id for h in asyncio.run(recall.search("上海", limit=5, mode="bm25"))]
    assert set(shanghai[:2]) == {stored[1].id, stored[4].id}
    # then the messages up to two after them (`recall_context_messages`: keyed with them), and no other
    assert set(shanghai) == {stored[i].id for i in (1, 2, 3, 4, 5)}
    assert asyncio.run(recall.search("伦敦", limit=5, mode="bm25")) == []


def test_archival_finds_chinese_memories_by_shared_words(database_url, tmp_path):
    backend = EdgeBackend(tmp_path / "qdrant", FakeEmbedder.dim)
    try:
        service = ArchivalService(
            1,
            engine=make_engine(database_url),
            open_backend=lambda: backend,
            embedder=FakeEmbedder(),
            config=ArchivalConfig(),
            clock=ManualClock(T0),
        )
        ids = [asyncio.run(service.insert(t)).id for t in TEXTS]
        assert len(set(ids)) == len(TEXTS)
        for query, index in QUERIES.items():
            hits = asyncio.run(service.search(query, top_k=3, mode="bm25", count_hits=False))
            assert hits and hits[0].id == ids[index], query
        shanghai = {h.id for h in asyncio.run(service.search("上海", top_k=5, mode="bm25", count_hits=False))}
        assert shanghai == {ids[1], ids[4]}
    finally:
        backend.close()
