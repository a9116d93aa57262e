"""Odd text behaves alike on SQLite and Postgres (issue 10, item 8): a message too long for a Postgres
`tsvector` is indexed in part and recall keeps working, and a NUL byte anywhere in a turn is stored by one rule
(replaced by U+FFFD) on both databases instead of losing the turn on Postgres."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta

from sqlalchemy import text as sql

from pagemind.runtime.agent import Agent
from pagemind.runtime.memory.archival.memory import ArchivalService
from pagemind.runtime.memory.recall.fulltext import INDEX_CHARS
from pagemind.runtime.memory.recall.memory import RecallService
from pagemind.runtime.memory.vectors.server import ServerBackend
from pagemind.runtime.messages import Message
from pagemind.runtime.spec.agent import AgentSpec
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.records import NUL_REPLACEMENT, without_nul
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.clock import ManualClock
from pagemind.runtime.testing.embedder import FakeEmbedder
from pagemind.runtime.testing.responses import call, reply_body, tool_call_body, tool_calls_body
from tests.runtime.memory.archival.test_archival import DIM, T0

TOOLS = ["send_message", "conversation_search", "core_memory_append"]


def spec(name: str = "odd") -> AgentSpec:
    return AgentSpec.model_validate(
        {
            "name": name,
            "model": {"name": "m"},
            "system": "s",
            "tools": TOOLS,
            "blocks": [{"label": "human", "value": "", "limit": 200}],
        }
    )


def huge_message() -> str:
    """About 1.4 MB: a findable beginning, then many distinct words (a tsvector of them passes Postgres' 1 MB)."""
    return "Zanzibar itinerary for the spring trip. " + " ".join(f"token{n:07d}" for n in range(110_000))


def test_the_rule_for_nul():
    assert NUL_REPLACEMENT == "\ufffd"
    assert without_nul("a\x00b\x00") == "a\ufffdb\ufffd" and without_nul("plain") == "plain"


def test_a_huge_message_is_indexed_in_part_and_recall_keeps_working(database_url):
    store = StateStore(make_engine(database_url))
    agent_id = store.ensure_agent(spec()).id
    big = huge_message()
    assert len(big.encode()) > 1_300_000
    [stored] = store.append_messages(agent_id, [Message("user", big, T0)])
    store.append_messages(agent_id, [Message("user", "I adopted a cat called Miso", T0 + timedelta(minutes=1))])
    recall = RecallService(agent_id, engine=store.engine, embedder=None)

    zanzibar = asyncio.run(recall.search("Zanzibar itinerary"))
    [hit] = [h for h in zanzibar if h.id == stored.id]
    assert len(hit.text) == len(big)  # found, and shown whole
    assert [h.text for h in asyncio.run(recall.search("Miso"))] == ["I adopted a cat called Miso"]
    assert recall.fulltext.watermark(agent_id) > stored.id  # past the huge message: the index moved on
    assert asyncio.run(recall.search("token0109999")) == []  # beyond the indexed part, on both databases
    assert asyncio.run(recall.search("token0000001"))  # within it

    later = store.append_messages(agent_id, [Message("user", "Mei plays the cello", T0 + timedelta(minutes=2))])
    assert asyncio.run(recall.search("cello"))[0].id == later[0].id


def test_the_indexed_part_is_bounded():
    assert 10_000 <= INDEX_CHARS <= 200_000  # 4 bytes a character at most: far below 1 MB of tsvector


def test_nul_in_a_message_is_stored_the_same_way_on_both_databases(database_url):
    store = StateStore(make_engine(database_url))
    agent_id = store.ensure_agent(spec()).id
    [message] = store.append_messages(agent_id, [Message("user", "Lin\x00likes green tea", T0)])
    assert [m.content for m in store.all_messages(agent_id)] == ["Lin\ufffdlikes green tea"]
    hits = asyncio.run(RecallService(agent_id, engine=store.engine, embedder=None).search("green tea"))
    assert [h.id for h in hits] == [message.id]


def test_nul_in_sql_parameters_of_raw_statements_and_lookups(database_url):
    """The rule holds below the ORM too: raw statements and WHERE parameters are cleaned alike."""
    store = StateStore(make_engine(database_url))
    agent_id = store.ensure_agent(spec()).id
    store.append_messages(agent_id, [Message("user", "tea\x00time", T0)])
    with store.engine.connect() as conn:
        assert conn.execute(sql("SELECT :v"), {"v": "x\x00y"}).scalar() == "x\ufffdy"
        found = conn.execute(sql("SELECT count(*) FROM messages WHERE content = :c"), {"c": "tea\x00time"}).scalar()
    assert found == 1  # a lookup by the raw text finds the stored row


async def test_nul_in_a_turn_user_message_tool_arguments_and_results(scripted_openai, make_agent, database_url):
    """A NUL in the user's message, in a tool argument (written into a block and echoed in the tool result) and in
    the reply: the turn completes and is stored on both databases."""
    scripted_openai.add(
        tool_calls_body(
            call("core_memory_append", json.dumps({"label": "human", "content": "Name: Lin\x00"})), content="noting\x00"
        ),
        tool_call_body("send_message", {"message": "Hello\x00 Lin"}),
    )
    agent = await make_agent(database_url, scripted_openai.client(), spec())
    result = await agent.run_turn("Hi\x00 I am Lin")
    assert result.reply is not None and result.steps == 2

    fresh = await Agent.load(agent.spec, store=StateStore(make_engine(database_url)))
    assert fresh.memory.get("human").value == "Name: Lin\ufffd"
    contents = [m.content for m in fresh.store.all_messages(fresh.record.id)]
    assert contents[0] == "Hi\ufffd I am Lin" and "noting\ufffd" in contents
    assert not any("\x00" in (c or "") for c in contents)
    [version] = fresh.store.block_history(fresh.record.id, "human")
    assert version.new_value == "Name: Lin\ufffd"

    scripted_openai.add(reply_body("fine"))  # the next turn works from what was stored
    again = await make_agent(database_url, scripted_openai.client(), spec())
    assert (await again.run_turn("and now?")).reply == "fine"
    assert "Hi\ufffd I am Lin" in json.dumps(scripted_openai.requests[-1]["messages"], ensure_ascii=False)


def test_nul_in_an_archival_memory_is_the_same_in_sql_and_the_vector_store(database_url):
    engine = make_engine(database_url)
    backend = ServerBackend.connect(":memory:", None, "pagemind_odd", DIM)
    try:
        service = ArchivalService(
            1, engine=engine, open_backend=lambda: backend, embedder=FakeEmbedder(), clock=ManualClock(T0)
        )
        result = asyncio.run(service.insert("Lin\x00 drinks green tea"))
        assert result.text == "Lin\ufffd drinks green tea"
        assert [m.text for m in service.list()] == [result.text]
        assert [r.text for r in service.store.all()] == [result.text]
    finally:
        backend.close()


def test_a_message_the_database_still_refuses_is_skipped_not_blocking(database_url, monkeypatch):
    """Belt and braces: with the bounds lifted, Postgres refuses the huge message's tsvector; that one message is
    skipped (logged), the watermark moves past it and later messages are found, on both databases."""
    from pagemind.runtime.memory.recall import fulltext
    from pagemind.runtime.memory.recall import rows as recall_rows

    monkeypatch.setattr(fulltext, "OWN_BYTES", 10**8)
    monkeypatch.setattr(recall_rows, "INDEX_CHARS", 10**8)
    store = StateStore(make_engine(database_url))
    agent_id = store.ensure_agent(spec()).id
    store.append_messages(
        agent_id,
        [
            Message("user", "a short first note about tea", T0),
            Message("user", huge_message(), T0 + timedelta(minutes=1)),
            Message("user", "Mei plays the cello", T0 + timedelta(minutes=2)),
        ],
    )
    recall = RecallService(agent_id, engine=store.engine, embedder=None)
    assert asyncio.run(recall.search("cello"))[0].text == "Mei plays the cello"
    assert asyncio.run(recall.search("tea"))[0].text == "a short first note about tea"
    assert recall.fulltext.watermark(agent_id) == max(m.id for m in store.all_messages(agent_id))
