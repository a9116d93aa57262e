"""A step's commit (`StateStore.commit_step`): one statement on Postgres (`state.conversation.step_commit`), a
transaction on SQLite; both store the same rows, and a stale block version stores nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from pagemind.blocks import BlockEdit
from pagemind.runtime.messages import Message
from pagemind.runtime.state.block_edits import StaleBlocks
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.records import StepRecord
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.specs import build_spec
from pagemind.tools import ToolCall

AT = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)


def prepared(database_url: str) -> tuple[StateStore, int, dict[str, int]]:
    store = StateStore(make_engine(database_url))
    spec = build_spec()
    agent_id = store.ensure_agent(spec).id
    return store, agent_id, store.load_core(agent_id, spec)[1]


def record(index: int) -> StepRecord:
    return StepRecord("turn-1", index, "gpt-4o-mini", 120, 7, None, AT, 50.5, 53.25)


def edit(label: str, old: str, new: str, seconds: int = 0) -> BlockEdit:
    return BlockEdit(label, "append", old, new, AT + timedelta(seconds=seconds))


async def test_a_step_stores_its_record_messages_and_edits_in_order(database_url):
    store, agent_id, versions = prepared(database_url)
    call = ToolCall("call-1", "core_memory_append", '{"label": "human", "content": "likes \\u00e9t\\u00e9"}')
    messages = [
        Message("assistant", None, AT, tool_calls=(call,), turn_id="turn-1"),
        Message("tool", "ok\x00done", AT, tool_call_id="call-1", name="core_memory_append", turn_id="turn-1"),
        Message("tool", "café ☕", AT, tool_call_id="call-2", name="send_message", is_error=True, turn_id="turn-1"),
    ]
    # Two edits of one block and one of another: the block keeps the last value, its version moves by two.
    edits = [edit("human", "", "a"), edit("human", "a", "a b", 1), edit("persona", "I am a careful tester.", "p")]
    step_id, stored = await store.commit_step(agent_id, record(1), messages, edits, versions)

    assert [m.id for m in stored] == sorted(m.id for m in stored) and all(m.step_id == step_id for m in stored)
    read = store.turn_messages(agent_id, "turn-1")
    assert [(m.id, m.role, m.tool_calls, m.tool_call_id, m.name, m.is_error, m.created_at) for m in read] == [
        (s.id, s.role, s.tool_calls, s.tool_call_id, s.name, s.is_error, AT) for s in stored
    ]
    assert [m.content for m in read] == [None, "ok\ufffddone", "café ☕"]  # NUL: the store's one rule
    assert read[0].tool_calls == (call,)
    [step] = store.steps(agent_id)
    assert (step.id, step.step_index, step.prompt_tokens, step.model_ms, step.total_ms) == (
        step_id,
        1,
        120,
        50.5,
        53.25,
    )
    assert versions == {"persona": 1, "human": 2, "constraints": 0}
    assert store.block_versions(agent_id) == versions
    blocks = {b.label: b.value for b in store.load_blocks(agent_id, build_spec())}
    assert (blocks["human"], blocks["persona"]) == ("a b", "p")
    history = store.block_history(agent_id)
    assert [(v.label, v.new_value, v.step_id) for v in history] == [
        ("human", "a", step_id),
        ("human", "a b", step_id),
        ("persona", "p", step_id),
    ]


async def test_a_step_without_edits_or_messages_stores_its_record(database_url):
    store, agent_id, versions = prepared(database_url)
    step_id, stored = await store.commit_step(agent_id, record(1), [], [], versions)
    assert stored == [] and [s.id for s in store.steps(agent_id)] == [step_id]
    assert versions == {"persona": 0, "human": 0, "constraints": 0}


async def test_one_stale_block_stores_nothing_of_the_step(database_url):
    store, agent_id, versions = prepared(database_url)
    await store.commit_step(agent_id, record(1), [], [edit("human", "", "elsewhere")], dict(versions))  # another writer
    message = Message("assistant", "hi", AT, turn_id="turn-1")
    with pytest.raises(StaleBlocks, match="human") as raised:
        await store.commit_step(
            agent_id, record(2), [message], [edit("persona", "x", "p"), edit("human", "", "h")], versions
        )
    assert "persona" not in str(raised.value)  # only the block that moved is named
    assert len(store.steps(agent_id)) == 1 and store.turn_messages(agent_id, "turn-1") == []
    assert store.block_versions(agent_id) == {"persona": 0, "human": 1, "constraints": 0}  # persona untouched
    assert versions == {"persona": 0, "human": 0, "constraints": 0}  # nothing written: the caller's view unchanged
    assert [v.new_value for v in store.block_history(agent_id)] == ["elsewhere"]


async def test_unchecked_edits_apply_whatever_the_version(database_url):
    store, agent_id, _ = prepared(database_url)
    await store.commit_step(agent_id, record(1), [], [edit("human", "", "one")], None)
    await store.commit_step(agent_id, record(2), [], [edit("human", "one", "two")], None)
    assert store.block_versions(agent_id)["human"] == 2


async def test_an_accepted_message_is_stored_with_its_key_and_a_used_key_stores_nothing(database_url):
    from sqlalchemy.exc import IntegrityError

    store, agent_id, _ = prepared(database_url)
    first = await store.accept_message(agent_id, Message("user", "hi\x00", AT, turn_id="turn-1"), "key-1")
    assert await store.turn_for_key(agent_id, "key-1") == "turn-1"
    assert [(m.id, m.content) for m in store.turn_messages(agent_id, "turn-1")] == [(first.id, "hi\ufffd")]
    with pytest.raises(IntegrityError):
        await store.accept_message(agent_id, Message("user", "again", AT, turn_id="turn-2"), "key-1")
    assert store.turn_messages(agent_id, "turn-2") == [] and store.message_count(agent_id) == 1
    unkeyed = await store.accept_message(agent_id, Message("user", "no key", AT, turn_id="turn-3"))
    assert unkeyed.id > first.id and await store.turn_for_key(agent_id, "turn-3") is None


async def test_pressure_state_is_written_field_by_field(database_url):
    store, agent_id, _ = prepared(database_url)
    await store.set_pressure_state(agent_id, correction=1.25)
    await store.set_pressure_state(agent_id, warned=True)
    await store.set_pressure_state(agent_id)  # nothing to write
    record = store.agent_record(agent_id)
    assert (record.token_correction, record.pressure_warned, record.summary) == (1.25, True, "")
    await store.set_pressure_state(agent_id, warned=False, summary="so far")
    record = store.agent_record(agent_id)
    assert (record.token_correction, record.pressure_warned, record.summary) == (1.25, False, "so far")


async def test_freshness_reads_newest_ids_versions_and_revision_in_one_go(database_url):
    store, agent_id, versions = prepared(database_url)
    empty = await store.freshness(agent_id)
    assert (empty.newest, empty.versions, empty.archival_revision) == (0, versions, 0)
    _, stored = await store.commit_step(
        agent_id, record(1), [Message("assistant", "hi", AT, turn_id="turn-1")], [edit("human", "", "x")], versions
    )
    fresh = await store.freshness(agent_id)
    assert (fresh.newest, fresh.versions["human"]) == (stored[0].id, 1)
    bare = store.ensure_agent(build_spec("bare", blocks=[])).id
    bare_fresh = await store.freshness(bare)
    assert bare_fresh.versions == {} and bare_fresh.newest == 0  # no block: still one row
