"""Loading an agent whose definition is unchanged reads its state in three statements (`StateStore.unchanged_agent`, `state.agent_load`): the
same state the writing path (`ensure_agent`, `Window.load`, `load_core`) gives, and nothing when something would
need writing."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import delete, update

from pagemind.blocks import BlockEdit
from pagemind.runtime.agent import Agent
from pagemind.runtime.messages import Message
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.records import StepRecord
from pagemind.runtime.state.rows import blocks_table
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.specs import build_spec
from pagemind.runtime.window import Window
from pagemind.tools import ToolCall

AT = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


async def lived_agent(database_url: str) -> tuple[StateStore, int]:
    """An agent with a summary, an edited block, and messages in and out of its window."""
    store = StateStore(make_engine(database_url))
    agent_id = store.ensure_agent(build_spec()).id
    versions = store.load_core(agent_id, build_spec())[1]
    for turn in range(3):
        call = ToolCall(f"call-{turn}", "core_memory_append", '{"label": "human", "content": "x"}')
        await store.accept_message(agent_id, Message("user", f"hello {turn}", AT, turn_id=f"t{turn}"), key=f"k{turn}")
        await store.commit_step(
            agent_id,
            StepRecord(f"t{turn}", 1, "gpt-4o-mini", 10, 2, None, AT, 1.0, 1.0),
            [
                Message("assistant", None, AT, tool_calls=(call,), turn_id=f"t{turn}"),
                Message("tool", "ok", AT, tool_call_id=call.id, name=call.name, turn_id=f"t{turn}"),
            ],
            [BlockEdit("human", "append", "x" * turn, "x" * (turn + 1), AT)],
            versions,
        )
    oldest = [m.id for m in store.in_context_messages(agent_id)[:3]]
    await store.evict(agent_id, oldest, "They said hello.", 100, 60, AT)
    return store, agent_id


async def test_the_state_read_is_the_state_the_writing_path_reads(database_url):
    store, agent_id = await lived_agent(database_url)
    spec = build_spec()
    stored = await store.unchanged_agent(spec)
    assert stored is not None

    record = store.ensure_agent(spec)
    window = Window.load(store, record)
    blocks, versions = store.load_core(record.id, spec)
    assert stored.record == record and stored.record.summary == "They said hello."
    assert stored.blocks == blocks and stored.versions == versions == {"persona": 0, "human": 3, "constraints": 0}
    assert (
        (stored.newest, stored.message_count)
        == (window.seen, window.recall_count)
        == (store.last_message_id(agent_id), 9)
    )
    assert stored.messages == window.messages and len(stored.messages) == 6
    fresh = Window.from_stored(store, stored)
    assert (fresh.messages, fresh.summary, fresh.seen, fresh.recall_count, fresh.block_versions) == (
        window.messages,
        window.summary,
        window.seen,
        window.recall_count,
        versions,
    )
    assert not await fresh.is_stale()


async def test_nothing_is_read_when_something_would_need_writing(database_url):
    store, agent_id = await lived_agent(database_url)
    assert await store.unchanged_agent(build_spec("someone-new")) is None  # not created yet
    assert await store.unchanged_agent(build_spec(system="Another prompt.")) is None  # the definition changed
    with store.engine.begin() as conn:  # a stored block's limit no longer the spec's (same fingerprint)
        conn.execute(
            update(blocks_table)
            .where(blocks_table.c.agent_id == agent_id, blocks_table.c.label == "persona")
            .values(char_limit=7)
        )
    assert await store.unchanged_agent(build_spec()) is None
    store.ensure_agent(build_spec())  # the writing path puts it right
    assert await store.unchanged_agent(build_spec()) is not None
    with store.engine.begin() as conn:  # a block of the spec missing
        conn.execute(
            delete(blocks_table).where(blocks_table.c.agent_id == agent_id, blocks_table.c.label == "constraints")
        )
    assert await store.unchanged_agent(build_spec()) is None


async def test_loading_an_agent_takes_whichever_path_applies(database_url):
    store, agent_id = await lived_agent(database_url)
    agent = await Agent.load(build_spec(), store=store)  # unchanged: the reads
    assert agent.record.id == agent_id and agent.memory.get("human").value == "xxx"
    assert len(agent.window.messages) == 6 and agent.window.block_versions["human"] == 3
    reset = await Agent.load(build_spec(), store=store, reset_memory=True)  # a reset writes: the other path
    assert reset.memory.get("human").value == "" and reset.window.summary == ""
    changed = await Agent.load(build_spec(human_limit=300), store=store)  # a changed spec is stored, then read
    assert changed.memory.get("human").limit == 300 and store.get_agent("tester").spec_hash == (
        build_spec(human_limit=300).spec_hash()
    )
