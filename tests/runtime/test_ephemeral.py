"""Ephemeral blocks (`ephemeral: true`) are reset to their seed at session end, durably and only once."""

import json

from pagemind.runtime.agent import Agent
from pagemind.runtime.ephemeral import clear_ephemeral
from pagemind.runtime.loop import run_turn
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.models import ScriptedModel
from pagemind.runtime.testing.responses import tool_call_body as tool_call
from pagemind.runtime.testing.specs import build_spec

SCHEMA = {"type": "object", "properties": {"mood": {"type": "string"}, "topics": {"type": "array"}}}


def ephemeral_spec():
    blocks = [
        {"label": "human", "value": "Name: Lin", "limit": 200},
        {"label": "session", "value": "", "limit": 200, "ephemeral": True},
        {"label": "today", "schema": SCHEMA, "value": {"topics": []}, "limit": 200, "ephemeral": True},
    ]
    return build_spec(blocks=blocks, tools=["send_message", "core_memory_append", "core_memory_update"])


async def noted_agent(make_agent, database_url) -> Agent:
    """An agent whose turn wrote to all three blocks."""
    model = ScriptedModel(
        [
            tool_call("core_memory_append", {"label": "session", "content": "Lin is packing for Oslo."}),
            tool_call("core_memory_update", {"label": "today", "changes": {"mood": "excited", "topics": ["move"]}}),
            tool_call("core_memory_append", {"label": "human", "content": "Moving to Oslo."}),
            tool_call("send_message", {"message": "Exciting!"}),
        ]
    )
    agent = await make_agent(database_url, model, ephemeral_spec())
    await run_turn(agent, "I'm packing for Oslo!")
    return agent


async def test_clearing_resets_ephemeral_blocks_to_their_seed_and_survives_a_restart(make_agent, database_url):
    agent = await noted_agent(make_agent, database_url)
    assert agent.memory.get("session").value == "Lin is packing for Oslo."
    result = await clear_ephemeral(agent)
    assert result == {"job": "clear_ephemeral", "cleared": ["session", "today"]}
    assert agent.memory.get("session").value == "" and agent.memory.get("today").value == '{"topics":[]}'
    assert agent.memory.get("today").schema is not None  # the block keeps what it is
    fresh = await Agent.load(agent.spec, store=StateStore(make_engine(database_url)))
    values = {b.label: b.value for b in fresh.memory.blocks}
    assert values == {"human": "Name: Lin\nMoving to Oslo.", "session": "", "today": '{"topics":[]}'}
    history = fresh.store.block_history(fresh.record.id)
    clears = [(h.label, h.old_value) for h in history if h.operation == "clear"]
    assert clears == [
        ("session", "Lin is packing for Oslo."),
        ("today", json.dumps({"topics": ["move"], "mood": "excited"}, separators=(",", ":"))),
    ]


async def test_clearing_twice_writes_nothing_the_second_time(make_agent, database_url):
    agent = await noted_agent(make_agent, database_url)
    await clear_ephemeral(agent)
    versions = dict(agent.window.block_versions)
    assert await clear_ephemeral(agent) == {"job": "clear_ephemeral", "cleared": []}
    assert agent.store.block_versions(agent.record.id) == versions
    assert [h.operation for h in agent.store.block_history(agent.record.id)].count("clear") == 2


async def test_clearing_sees_an_edit_made_by_another_process(make_agent, database_url):
    agent = await make_agent(database_url, ScriptedModel(), ephemeral_spec())
    other = await Agent.load(agent.spec, store=StateStore(make_engine(database_url)))
    other.memory.append("session", "Written elsewhere.", other.now())
    other.store.commit_edits(other.record.id, other.memory.clear_pending(), other.window.block_versions)
    assert await clear_ephemeral(agent) == {"job": "clear_ephemeral", "cleared": ["session"]}
    assert agent.store.load_blocks(agent.record.id, agent.spec)[1].value == ""


async def test_an_agent_without_ephemeral_blocks_has_nothing_to_clear(make_agent, sqlite_url):
    agent = await make_agent(sqlite_url, ScriptedModel(), build_spec())
    assert await clear_ephemeral(agent) == {"job": "clear_ephemeral", "cleared": []}
    assert agent.store.block_history(agent.record.id) == []


async def test_a_clear_that_loses_a_race_reads_the_blocks_again(make_agent, sqlite_url, monkeypatch):
    agent = await noted_agent(make_agent, sqlite_url)
    other = await Agent.load(agent.spec, store=StateStore(make_engine(sqlite_url)))
    other.memory.append("session", "And a late note.", other.now())
    other.store.commit_edits(other.record.id, other.memory.clear_pending(), other.window.block_versions)

    async def not_read_again() -> None:  # the other edit lands after this agent looked
        pass

    monkeypatch.setattr(agent, "refresh", not_read_again)
    assert await clear_ephemeral(agent) == {"job": "clear_ephemeral", "cleared": ["session", "today"]}
    cleared = [h.old_value for h in agent.store.block_history(agent.record.id, "session") if h.operation == "clear"]
    assert cleared == ["Lin is packing for Oslo.\nAnd a late note."]  # what was there, not the stale copy
