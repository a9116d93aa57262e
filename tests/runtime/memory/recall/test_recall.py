"""Recall memory: conversation_search over every stored message (evicted ones too), on SQLite and Postgres."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta

import numpy as np
import pytest

from pagemind.runtime.agent import Agent
from pagemind.runtime.memory.recall.memory import RecallService
from pagemind.runtime.memory.recall.rows import searchable_text
from pagemind.runtime.messages import Message
from pagemind.runtime.process.settings import Settings
from pagemind.runtime.spec.agent import AgentSpec
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.clock import ManualClock
from pagemind.runtime.testing.embedder import FakeEmbedder
from pagemind.tools import BUILTIN_TOOLS, ToolCall, dispatch_tool_calls
from tests.runtime.memory.archival.test_archival import T0, at_cosine, unit

TOOLS = ["send_message", "conversation_search"]


def spec(name: str) -> AgentSpec:
    return AgentSpec.model_validate({"name": name, "model": {"name": "m"}, "system": "s", "tools": TOOLS})


def conversation(start=T0 - timedelta(days=10)) -> list[Message]:
    """Two sessions days apart; the first is no longer in the window (evicted)."""
    lines = [
        ("user", "My sister Mei is getting married in Lyon next spring", 0, False),
        ("assistant", "How exciting! Will you play at the ceremony?", 1, False),
        ("user", "Yes, I will play the cello at her wedding", 2, False),
        ("user", "I adopted a cat called Miso", 7 * 24 * 60, True),
        ("assistant", "Miso is a lovely name for a cat!", 7 * 24 * 60 + 1, True),
        ("user", "我喜欢喝绿茶", 7 * 24 * 60 + 2, True),
    ]
    return [Message(role, text, start + timedelta(minutes=m), in_context=ctx) for role, text, m, ctx in lines]


@pytest.fixture
def setup(database_url, tmp_path):
    """Two agents over one database, alice with a conversation, bob with his own message."""
    store = StateStore(make_engine(database_url))
    settings = Settings(home=tmp_path, database_url=database_url)

    async def load(name: str, embedder=None) -> Agent:
        agent = await Agent.load(spec(name), store=store, settings=settings, clock=ManualClock(T0))
        agent.recall.embedder = embedder
        return agent

    return store, load


def search(agent: Agent, **arguments) -> str:
    [result] = asyncio.run(
        dispatch_tool_calls(
            [ToolCall("1", "conversation_search", json.dumps(arguments))],
            BUILTIN_TOOLS,
            agent.tool_context(agent.memory.copy()),
        )
    )
    assert not result.is_error, result.content
    return result.content


def test_finds_a_message_evicted_from_the_window(setup):
    store, load = setup
    alice = asyncio.run(load("alice"))
    store.append_messages(alice.record.id, conversation())
    assert all("wedding" not in (m.content or "") for m in store.in_context_messages(alice.record.id))
    found = search(alice, query="sister's wedding")
    assert "user: Yes, I will play the cello at her wedding" in found
    assert "sister Mei is getting married" in "\n".join(found.splitlines()[1:3])


def test_hybrid_ranking_with_dense_and_the_keyed_previous_message(setup):
    store, load = setup
    v = unit(1)
    embedder = FakeEmbedder({"Who is getting married?": v, "quantum chromodynamics lattice": unit(0, 0, 0, 0, 0, 1)})
    alice = asyncio.run(load("alice", embedder))
    store.append_messages(alice.record.id, conversation())
    # the dense half: the question's vector sits next to the first message's own document
    first = alice.recall  # warm the index so the document texts are known
    asyncio.run(first.search("married"))
    doc = next(m for m in first.indexes._load(0) if "married" in m.text).own_document()
    embedder.vectors[doc] = at_cosine(v, 0.9, 2)
    first.indexes.dense = type(first.indexes.dense)()  # rebuild the dense index with the new vector
    first.indexes._last = None
    hits = asyncio.run(first.search("Who is getting married?"))
    assert hits[0].text == "My sister Mei is getting married in Lyon next spring"
    assert asyncio.run(first.search("quantum chromodynamics lattice")) == []  # nothing beats noise


def test_roles_dates_paging_and_listing(setup):
    store, load = setup
    alice = asyncio.run(load("alice"))
    store.append_messages(alice.record.id, conversation())
    assert "assistant: Miso is a lovely name" in search(alice, query="cat Miso", roles=["assistant"])
    assert "adopted" not in search(alice, query="cat Miso", roles=["assistant"])
    recent = search(alice, query="cello wedding cat", start_date=(T0 - timedelta(days=5)).date().isoformat())
    assert "a cat called Miso" in recent and "at her wedding" not in recent
    assert search(alice, query="cello wedding cat", start_date=T0.date().isoformat()).startswith("No messages found")
    old = search(alice, query="cat", end_date=(T0 - timedelta(days=10)).date().isoformat())
    assert old.startswith("No messages found")
    newest = search(alice, limit=2)
    assert newest.splitlines()[1:] == [
        "- [2026-11-26 15:02] user: 我喜欢喝绿茶",
        "- [2026-11-26 15:01] assistant: Miso is a lovely name for a cat!",
    ]
    pages = [search(alice, limit=4, page=p).splitlines()[1:] for p in (1, 2, 3)]
    assert [len(p) for p in pages] == [4, 2, 0] and len({line for p in pages for line in p}) == 6


def test_cjk_text_is_searchable_by_character_bigrams(setup):
    store, load = setup
    alice = asyncio.run(load("alice"))
    store.append_messages(alice.record.id, conversation())
    assert "我喜欢喝绿茶" in search(alice, query="绿茶")


def test_isolation_and_new_messages_are_indexed_on_the_next_search(setup):
    store, load = setup
    alice, bob = asyncio.run(load("alice")), asyncio.run(load("bob"))
    store.append_messages(alice.record.id, conversation())
    assert search(bob, query="wedding").startswith("No messages found")
    store.append_messages(bob.record.id, [Message("user", "My wedding is in June", T0)])
    assert "My wedding is in June" in search(bob, query="wedding")
    assert "June" not in search(alice, query="wedding")


def test_searchable_text_of_tool_calls():
    calls = [{"id": "c", "name": "send_message", "arguments": json.dumps({"message": "Hello Lin"})}]
    assert searchable_text("assistant", None, calls, None) == "Hello Lin"
    assert searchable_text("tool", "Hello Lin", None, "send_message") == ""
    assert searchable_text("system", "alert", None, None) == ""


def test_bm25_only_mode_without_an_embedder(database_url):
    store = StateStore(make_engine(database_url))
    record = store.ensure_agent(spec("carol"))
    store.append_messages(record.id, conversation())
    recall = RecallService(record.id, engine=store.engine, embedder=None)
    hits = asyncio.run(recall.search("married sister"))
    assert hits and hits[0].text.startswith("My sister Mei")
    assert np.isfinite(hits[0].score)


@pytest.mark.parametrize("depth", [1, 2])
def test_keyword_context_reaches_back_recall_context_messages(database_url, depth):
    """ "Mei" is named two messages before "…the cello at her wedding": only a two-message keyword context lets
    the reply be found by her name; what a hit shows is the message alone either way."""
    from pagemind.runtime.spec.memory import ArchivalConfig

    store = StateStore(make_engine(database_url))
    record = store.ensure_agent(spec(f"ctx{depth}"))
    store.append_messages(record.id, conversation())
    recall = RecallService(
        record.id, engine=store.engine, embedder=None, config=ArchivalConfig(recall_context_messages=depth)
    )
    hits = asyncio.run(recall.search("Mei cello", limit=10))
    cello = [h for h in hits if "cello" in h.text]
    assert [h.text for h in cello] == ["Yes, I will play the cello at her wedding"]
    mei = [h.text for h in asyncio.run(recall.search("Mei", limit=10))]
    assert ("Yes, I will play the cello at her wedding" in mei) is (depth == 2)
    if depth == 2:
        assert hits[0].text == "Yes, I will play the cello at her wedding"  # both words, one of them by context


def test_keyword_context_spans_searches(database_url):
    """Messages indexed by a later search get the same context as if indexed in one go: the two messages before
    the first new one are read back for it."""
    store = StateStore(make_engine(database_url))
    record = store.ensure_agent(spec("ctx-late"))
    lines = conversation()
    recall = RecallService(record.id, engine=store.engine, embedder=None)
    store.append_messages(record.id, lines[:2])
    assert [h.text for h in asyncio.run(recall.search("Mei"))][:1] == [lines[0].content]  # indexes the first two
    store.append_messages(record.id, lines[2:])
    assert "Yes, I will play the cello at her wedding" in [h.text for h in asyncio.run(recall.search("Mei", limit=10))]
