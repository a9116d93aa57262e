"""The conversation a memory was filed from, indexed for keyword search and never shown (`memory.filed_from`):
on both adapters, through the tool, and rebuilt from SQL when a point is restored (`memory.reconcile`)."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta
from typing import Any

import numpy as np
import pytest

from pagemind.runtime.agent import Agent
from pagemind.runtime.loop import run_turn
from pagemind.runtime.memory.archival.filed_from import filed_together
from pagemind.runtime.memory.archival.memory import ArchivalService
from pagemind.runtime.memory.archival.reconcile import reconcile
from pagemind.runtime.memory.vectors.edge import EdgeBackend
from pagemind.runtime.messages import Message
from pagemind.runtime.process.settings import Settings
from pagemind.runtime.spec.agent import AgentSpec
from pagemind.runtime.spec.memory import ArchivalConfig
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.archival import RecordingArchival
from pagemind.runtime.testing.clock import ManualClock
from pagemind.runtime.testing.embedder import FakeEmbedder
from pagemind.runtime.testing.models import ScriptedModel
from pagemind.runtime.testing.responses import tool_call_body
from pagemind.runtime.testing.specs import spec_data
from pagemind.runtime.testing.step_context import tool_context
from pagemind.tools import BUILTIN_TOOLS, ToolCall, dispatch_tool_calls
from pagemind.tools.context import RecallHit
from tests.runtime.memory.archival.test_archival import T0, backend, run  # noqa: F401 (the fixture: both adapters)

SAID = "My sister just moved to Norway, the fjords are breathtaking"


def agent_with_messages(tmp_path, *texts: str) -> tuple[StateStore, int, list[int]]:
    store = StateStore(make_engine(f"sqlite:///{tmp_path / 'state.db'}"))
    record = store.ensure_agent(
        AgentSpec.model_validate({"name": "keeper", "model": {"name": "none"}, "system": "notes"})
    )
    said = store.append_messages(record.id, [Message("user", t, T0 - timedelta(minutes=1)) for t in texts])
    return store, record.id, [m.id for m in said]


def service_of(store: StateStore, agent_id: int, backend, **config) -> ArchivalService:
    return ArchivalService(
        agent_id,
        engine=store.engine,
        open_backend=lambda: backend,
        embedder=FakeEmbedder(),
        config=ArchivalConfig(**config),
        clock=ManualClock(T0),
    )


def keyword_texts(service: ArchivalService, query: str) -> list[str]:
    return [h.text for h in run(service.search(query, mode="bm25", count_hits=False))]


def test_the_words_a_memory_was_filed_from_find_it_and_are_never_shown(backend, tmp_path):
    store, agent_id, [said] = agent_with_messages(tmp_path, SAID)
    service = service_of(store, agent_id, backend)
    run(service.insert("Mei lives in Oslo", source_message_ids=[said]))
    run(service.insert("Lin plays the cello"))
    assert keyword_texts(service, "fjords") == ["Mei lives in Oslo"]  # the user's word, not the memory's
    assert keyword_texts(service, "Oslo") == ["Mei lives in Oslo"]
    off = service_of(store, agent_id, backend, context_messages=0)
    run(off.insert("Lin's sister is called Mei", source_message_ids=[said]))
    assert keyword_texts(off, "breathtaking") == ["Mei lives in Oslo"]  # off: the new memory indexes its text only


def test_a_point_restored_from_sql_gets_its_context_keywords_back(backend, tmp_path):
    store, agent_id, [said] = agent_with_messages(tmp_path, SAID)
    service = service_of(store, agent_id, backend)
    lost = run(service.insert("Mei lives in Oslo", source_message_ids=[said]))
    run(service.insert("Lin plays the cello"))
    service.store.delete([lost.id])  # a crash took the point; SQL keeps the row and its source messages
    assert keyword_texts(service, "fjords") == []
    assert reconcile(service.ledger, service.store, exclusive=False, restore=service.points).restored == 1
    assert keyword_texts(service, "fjords") == ["Mei lives in Oslo"]


def test_context_is_read_from_this_agents_messages_only(backend, tmp_path):
    store, agent_id, [said] = agent_with_messages(tmp_path, SAID)
    other = store.ensure_agent(AgentSpec.model_validate({"name": "other", "model": {"name": "none"}, "system": "x"}))
    [theirs] = store.append_messages(other.id, [Message("user", "the vault code is 4521", T0)])
    service = service_of(store, agent_id, backend)
    run(service.insert("Mei lives in Oslo", source_message_ids=[theirs.id]))
    assert keyword_texts(service, "vault code") == []


class NewestUserMessage:
    """A message log whose newest user message is `said` (what `conversation_search` lists without a query)."""

    def __init__(self, said_id: int):
        self.said_id, self.asked = said_id, []

    async def search(self, query=None, *, roles=None, start_date=None, end_date=None, limit=None, page=1):
        self.asked.append((query, roles, limit))
        return [RecallHit(id=self.said_id, role="user", time=T0, text=SAID)]


def test_the_insert_tool_files_a_memory_from_the_users_latest_message():
    archival, recall = RecordingArchival(), NewestUserMessage(41)
    context = tool_context("alice", archival=archival, recall=recall, clock=ManualClock(T0))
    [saved] = run(
        dispatch_tool_calls(
            [ToolCall("1", "archival_memory_insert", json.dumps({"content": "Mei lives in Oslo"}))],
            BUILTIN_TOOLS,
            context,
        )
    )
    assert not saved.is_error and recall.asked == [(None, ["user", "assistant"], 2)]
    assert archival.inserted == [
        {"content": "Mei lives in Oslo", "kind": "fact", "tags": [], "source_message_ids": [41]}
    ]
    without_log = RecordingArchival()
    run(
        dispatch_tool_calls(
            [ToolCall("2", "archival_memory_insert", json.dumps({"content": "x"}))],
            BUILTIN_TOOLS,
            tool_context("alice", archival=without_log, clock=ManualClock(T0)),
        )
    )
    assert without_log.inserted == [{"content": "x", "kind": "fact", "tags": []}]
    # the count follows the agent's `context_messages`; 0 files from nothing and asks the log nothing
    for count, asked in ((3, [(None, ["user", "assistant"], 3)]), (0, [])):
        archival, recall = RecordingArchival(), NewestUserMessage(41)
        archival.context_messages = count
        run(
            dispatch_tool_calls(
                [ToolCall("3", "archival_memory_insert", json.dumps({"content": "y"}))],
                BUILTIN_TOOLS,
                tool_context("alice", archival=archival, recall=recall, clock=ManualClock(T0)),
            )
        )
        assert recall.asked == asked and ("source_message_ids" in archival.inserted[0]) is bool(count)


def test_memories_filed_together_share_part_of_their_scores():
    scores = np.array([1.0, 0.0, 0.5, 0.2])
    filed = [T0, T0 + timedelta(seconds=30), T0 + timedelta(hours=1), T0 - timedelta(seconds=20)]
    shared = filed_together(scores, filed, 600, 0.2)
    # 0: the better of its neighbours (0.2 before, 0.0 after); 1: its predecessor's 1.0; 2: filed an hour later,
    # alone; 3: its successor's 1.0
    assert shared == pytest.approx([1.04, 0.2, 0.5, 0.4])
    assert filed_together(scores, filed, 600, 0.0) is scores


def test_switched_on_a_search_lifts_the_memory_filed_right_after_a_strong_match(backend, tmp_path):
    store, agent_id, _ = agent_with_messages(tmp_path, SAID)
    keywords_only = {"dense_weight": 0.0, "recency_weight": 0.0}  # scores the test can reason about
    service = service_of(store, agent_id, backend, **keywords_only)
    run(service.insert("Lin adopted a greyhound"))
    clock = service.clock
    clock.now = T0 + timedelta(seconds=30)
    run(service.insert("The dog is called Biscuit"))  # filed with the greyhound: the same conversation
    clock.now = T0 + timedelta(days=3)
    run(service.insert("The dog at the park barked"))
    default = {h.text: h.score for h in run(service.search("Lin greyhound dog", count_hits=False))}
    assert default["The dog is called Biscuit"] == default["The dog at the park barked"]  # off by default
    keywords_only["neighbour_weight"] = 0.2
    shared = service_of(store, agent_id, backend, **keywords_only)
    shared.clock = clock
    hits = run(shared.search("Lin greyhound dog", count_hits=False))
    assert [h.text for h in hits][:2] == ["Lin adopted a greyhound", "The dog is called Biscuit"]
    lifted = {h.text: h.score for h in hits}  # the order alone could come from the tie-break (Biscuit filed first)
    assert lifted["The dog is called Biscuit"] > lifted["The dog at the park barked"]


def test_a_memory_the_model_files_in_a_turn_is_filed_from_the_users_message(tmp_path):
    """End to end: the user's message of the turn is stored before the step, so the tool finds it."""
    backend = EdgeBackend(tmp_path / "shard", FakeEmbedder.dim)
    spec = AgentSpec.model_validate(
        {
            **spec_data("keeper"),
            "memory": {"prefetch_top_k": 0},
            "tools": ["send_message", "archival_memory_insert", "archival_search"],
        }
    )
    model = ScriptedModel(
        [
            tool_call_body("archival_memory_insert", {"content": "Mei lives in Oslo"}),
            tool_call_body("send_message", {"message": "How lovely!"}),
        ]
    )
    url = f"sqlite:///{tmp_path / 'state.db'}"

    async def turn() -> tuple[Any, ArchivalService]:
        clock = ManualClock(T0)
        agent = await Agent.load(
            spec,
            model=model,
            store=StateStore(make_engine(url)),
            settings=Settings(home=tmp_path, database_url=url),
            clock=clock,
        )
        agent.archival = ArchivalService(
            agent.record.id,
            engine=agent.store.engine,
            open_backend=lambda: backend,
            embedder=FakeEmbedder(),
            config=spec.memory.archival,
            clock=clock,
        )
        return await run_turn(agent, SAID), agent.archival

    try:
        result, archival = asyncio.run(turn())
        assert result.reply == "How lovely!"
        [memory] = archival.list()
        [said] = [m for m in StateStore(make_engine(url)).all_messages(memory.agent_id) if m.role == "user"]
        assert said.id in memory.source_message_ids
        assert keyword_texts(archival, "fjords") == ["Mei lives in Oslo"]
    finally:
        backend.close()
