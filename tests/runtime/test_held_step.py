"""A step held for the next commit (`runtime.loop`, `Window.hold`): a step that runs again and whose tools' effects
all commit with it is stored by the turn's next commit, in one transaction with it; a step with an effect outside
the database commits alone; a turn that fails before that commit takes the held step back (nothing of it is
stored, its edits leave memory) and its retry redoes it; the store writes several steps in order, with their
edits checked and counted as one step's are."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from pagemind.blocks import BlockEdit
from pagemind.runtime.agent import Agent
from pagemind.runtime.loop import run_turn
from pagemind.runtime.messages import Message
from pagemind.runtime.model.client import ModelRequestRejected
from pagemind.runtime.state.block_edits import StaleBlocks
from pagemind.runtime.state.conversation.step_commit import StepWrite
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.records import StepRecord
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.endpoint import http_error
from pagemind.runtime.testing.responses import tool_call_body as tool_call
from pagemind.runtime.testing.specs import build_spec
from pagemind.tools import ToolCall, tool

AT = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
RUNG: list[str] = []  # what `ring_bell` did outside the database


@tool
def ring_bell(tune: str) -> str:
    """Ring the bell outside (an effect no commit can take back).

    Args:
        tune: What to ring.
    """
    RUNG.append(tune)
    return f"rang {tune}"


def spy_commits(store: StateStore) -> list[list[int]]:
    """The step indexes of each `commit_steps` call, in order."""
    calls: list[list[int]] = []
    original = store.commit_steps

    async def commit_steps(agent_id, steps, *args, **kwargs):
        calls.append([w.record.step_index for w in steps])
        return await original(agent_id, steps, *args, **kwargs)

    store.commit_steps = commit_steps
    return calls


async def test_a_memory_edit_step_commits_with_the_reply(scripted_openai, make_agent, database_url):
    scripted_openai.add(
        tool_call("core_memory_append", {"label": "human", "content": "Lin"}),
        tool_call("send_message", {"message": "Hello Lin"}),
    )
    agent = await make_agent(database_url, scripted_openai.client())
    commits = spy_commits(agent.store)
    result = await run_turn(agent, "I'm Lin")

    assert commits == [[1, 2]]  # one commit, both steps
    assert [m.role for m in result.messages] == ["user", "assistant", "tool", "assistant", "tool"]
    assert all(m.id is not None for m in result.messages)
    # The second request already showed the held step and its edit.
    second = scripted_openai.requests[1]["messages"]
    assert "Lin" in second[0]["content"] and [m["role"] for m in second[1:4]] == ["user", "assistant", "tool"]

    store, agent_id = agent.store, agent.record.id
    steps = store.steps(agent_id)
    assert [(s.step_index, s.stop_reason) for s in steps] == [(1, None), (2, "send_message")]
    assert steps[0].id < steps[1].id
    stored = store.turn_messages(agent_id, result.turn_id)
    assert [m.id for m in stored] == sorted(m.id for m in stored) == [m.id for m in result.messages]
    assert [m.step_id for m in stored] == [None, steps[0].id, steps[0].id, steps[1].id, steps[1].id]
    [version] = store.block_history(agent_id, "human")
    assert (version.step_id, version.new_value) == (steps[0].id, "Lin")
    assert store.block_versions(agent_id)["human"] == agent.window.block_versions["human"] == 1
    assert agent.window.held == [] and [m.id for m in agent.window.messages] == [m.id for m in stored]

    fresh = await Agent.load(agent.spec, store=StateStore(make_engine(database_url)))
    assert fresh.memory.get("human").value == "Lin"
    assert [m.id for m in fresh.window.messages] == [m.id for m in stored]


@pytest.mark.parametrize("hold_steps", [True, False])
async def test_held_steps_switched_off_commit_each_step_alone_with_the_same_outcome(
    scripted_openai, make_agent, database_url, hold_steps
):
    """`Agent.hold_steps` off (the daemon's `hold_steps=false`): the same turn, stored the same, one commit a step."""
    scripted_openai.add(
        tool_call("core_memory_append", {"label": "human", "content": "Lin"}),
        tool_call("send_message", {"message": "Hello Lin"}),
    )
    agent = await make_agent(database_url, scripted_openai.client())
    agent.hold_steps = hold_steps
    commits = spy_commits(agent.store)
    result = await run_turn(agent, "I'm Lin")

    assert commits == ([[1, 2]] if hold_steps else [[1], [2]])
    assert (result.reply, result.stop_reason.value, result.steps) == ("Hello Lin", "send_message", 2)
    store, agent_id = agent.store, agent.record.id
    steps = store.steps(agent_id)
    assert [(s.step_index, s.stop_reason) for s in steps] == [(1, None), (2, "send_message")]
    stored = store.turn_messages(agent_id, result.turn_id)
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant", "tool"]
    assert [m.id for m in stored] == [m.id for m in result.messages]
    [version] = store.block_history(agent_id, "human")
    assert (version.step_id, version.new_value) == (steps[0].id, "Lin")
    assert agent.memory.get("human").value == "Lin" and agent.window.held == []


async def test_a_step_with_an_effect_outside_its_commit_commits_alone(scripted_openai, make_agent, sqlite_url):
    scripted_openai.add(
        tool_call("ring_bell", {"tune": "do"}),
        tool_call("core_memory_append", {"label": "human", "content": "x"}),
        tool_call("send_message", {"message": "done"}),
    )
    spec = build_spec(tools=["send_message", "core_memory_append", "tests.runtime.test_held_step:ring_bell"])
    agent = await make_agent(sqlite_url, scripted_openai.client(), spec)
    commits = spy_commits(agent.store)
    RUNG.clear()
    await run_turn(agent, "ring")
    assert RUNG == ["do"]
    assert commits == [[1], [2, 3]]  # the bell's step alone; the edit's with the reply


async def test_a_failed_turn_takes_the_held_step_back_and_its_retry_redoes_it(
    scripted_openai, make_agent, database_url
):
    scripted_openai.add(
        tool_call("core_memory_append", {"label": "human", "content": "Lin"}), http_error(400, "bad request")
    )
    agent = await make_agent(database_url, scripted_openai.client())
    with pytest.raises(ModelRequestRejected):
        await run_turn(agent, "I'm Lin", "key-1")
    store, agent_id = agent.store, agent.record.id
    assert store.steps(agent_id) == [] and store.block_history(agent_id, "human") == []
    assert agent.memory.get("human").value == ""  # the held edit left memory with its step
    assert [m.role for m in agent.window.messages] == ["user"] and agent.window.held == []
    assert agent.window.recall_count == 1

    scripted_openai.add(
        tool_call("core_memory_append", {"label": "human", "content": "Lin"}),
        tool_call("send_message", {"message": "Hello Lin"}),
    )
    result = await run_turn(agent, "I'm Lin", "key-1")
    assert result.reply == "Hello Lin"
    assert agent.memory.get("human").value == "Lin"
    assert [s.step_index for s in store.steps(agent_id)] == [1, 2]
    assert len(store.block_history(agent_id, "human")) == 1
    assert [m.role for m in store.turn_messages(agent_id, result.turn_id)] == [
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
    ]


async def test_a_block_changed_under_a_held_step_stores_neither_step(scripted_openai, make_agent, database_url):
    """Another writer edits the block between the held step and the next commit: the compare-and-set fails the
    whole commit, and the held step goes with it."""
    scripted_openai.add(
        tool_call("core_memory_append", {"label": "human", "content": "mine"}),
        tool_call("send_message", {"message": "ok"}),
    )
    agent = await make_agent(database_url, scripted_openai.client())
    store, agent_id = agent.store, agent.record.id
    original = store.commit_steps

    async def after_another_writer(*args, **kwargs):
        versions = dict(store.block_versions(agent_id))
        store.commit_edits(agent_id, [BlockEdit("human", "append", "", "theirs", AT)], versions)
        return await original(*args, **kwargs)

    store.commit_steps = after_another_writer
    with pytest.raises(StaleBlocks):
        await run_turn(agent, "remember")
    assert store.steps(agent_id) == []
    assert [v.new_value for v in store.block_history(agent_id, "human")] == ["theirs"]
    assert agent.memory.get("human").value == "" and agent.window.held == []


async def test_a_message_stored_during_a_held_step_comes_after_it(make_agent, database_url):
    """A write that adds to the view (the pressure warning's alert) stores the held step first: ids keep the
    view's order."""
    agent = await make_agent(database_url, None)
    window = agent.window
    [user] = await window.accept(Message("user", "hi", AT, turn_id="t1"))
    call = ToolCall("c1", "core_memory_append", "{}")
    held = [
        Message("assistant", None, AT, tool_calls=(call,), turn_id="t1"),
        Message("tool", "ok", AT, tool_call_id="c1", name="core_memory_append", turn_id="t1"),
    ]
    window.hold(StepRecord("t1", 1, "m", 1, 1, None, AT, 1.0, 1.0), held, [])
    assert window.messages[-2:] == held and window.recall_count == 3

    [alert] = await window.accept(Message("system", "alert", AT))
    assert window.held == []
    ids = [m.id for m in window.messages]
    assert None not in ids and ids == sorted(ids) and ids[-1] == alert.id
    assert [m.role for m in window.messages] == ["user", "assistant", "tool", "system"]
    assert window.recall_count == 4
    assert [s.step_index for s in agent.store.steps(agent.record.id)] == [1]


async def test_the_store_writes_several_steps_in_order_in_one_commit(database_url):
    store = StateStore(make_engine(database_url))
    spec = build_spec()
    agent_id = store.ensure_agent(spec).id
    versions = store.load_core(agent_id, spec)[1]

    def record(index: int, reason: str | None) -> StepRecord:
        return StepRecord("turn-1", index, "gpt-4o-mini", 100 + index, index, reason, AT, 50.0, 51.0 + index)

    def messages(index: int) -> list[Message]:
        call = ToolCall(f"call-{index}", "core_memory_append", "{}")
        return [
            Message("assistant", None, AT, tool_calls=(call,), turn_id="turn-1"),
            Message(
                "tool", f"result {index}", AT, tool_call_id=f"call-{index}", name="core_memory_append", turn_id="turn-1"
            ),
        ]

    # Both steps edit `human`: the block keeps the last value and moves two versions; each edit keeps its step.
    first = StepWrite(record(1, None), messages(1), [BlockEdit("human", "append", "", "a", AT)])
    second = StepWrite(
        record(2, "send_message"),
        messages(2),
        [
            BlockEdit("human", "append", "a", "a b", AT + timedelta(seconds=1)),
            BlockEdit("persona", "rethink", "I am a careful tester.", "p", AT),
        ],
    )
    step_ids, stored = await store.commit_steps(agent_id, [first, second], versions)

    steps = store.steps(agent_id)
    assert [s.id for s in steps] == step_ids and step_ids == sorted(step_ids)
    assert [(s.step_index, s.stop_reason, s.prompt_tokens, s.total_ms) for s in steps] == [
        (1, None, 101, 52.0),
        (2, "send_message", 102, 53.0),
    ]
    assert [m.content for m in stored] == [None, "result 1", None, "result 2"]
    assert [m.step_id for m in stored] == [step_ids[0]] * 2 + [step_ids[1]] * 2
    assert (
        [m.id for m in store.turn_messages(agent_id, "turn-1")]
        == [m.id for m in stored]
        == sorted(m.id for m in stored)
    )
    assert versions["human"] == 2 and versions["persona"] == 1 and store.block_versions(agent_id) == versions
    assert [(v.step_id, v.new_value) for v in store.block_history(agent_id, "human")] == [
        (step_ids[0], "a"),
        (step_ids[1], "a b"),
    ]
    blocks = {b.label: b.value for b in store.load_blocks(agent_id, spec)}
    assert (blocks["human"], blocks["persona"]) == ("a b", "p")

    # A version moved under one of them: neither step is stored.
    store.commit_edits(agent_id, [BlockEdit("human", "append", "a b", "x", AT)], dict(versions))
    with pytest.raises(StaleBlocks):
        await store.commit_steps(
            agent_id,
            [
                StepWrite(record(3, None), messages(3), [BlockEdit("persona", "append", "p", "q", AT)]),
                StepWrite(record(4, None), messages(4), [BlockEdit("human", "append", "a b", "y", AT)]),
            ],
            versions,
        )
    assert len(store.steps(agent_id)) == 2 and len(store.turn_messages(agent_id, "turn-1")) == 4


async def test_the_next_turn_reuses_what_was_worked_out_for_the_held_messages(
    scripted_openai, make_agent, sqlite_url, monkeypatch
):
    """The stored copies take the held messages' places in the caches keyed on the view's objects: the next turn
    renders and checks only its new messages, not the held step's again (nor the whole window)."""
    from pagemind.runtime import compiler
    from pagemind.runtime.pressure import history_repair

    scripted_openai.add(
        tool_call("core_memory_append", {"label": "human", "content": "Lin"}),
        tool_call("send_message", {"message": "Hello Lin"}),
        tool_call("send_message", {"message": "Again"}),
    )
    agent = await make_agent(sqlite_url, scripted_openai.client())
    await run_turn(agent, "I'm Lin")
    rendered, checked = [], []
    wire, valid = compiler._wire_message, history_repair.is_valid
    monkeypatch.setattr(compiler, "_wire_message", lambda m, *a: rendered.append(m) or wire(m, *a))
    monkeypatch.setattr(history_repair, "is_valid", lambda ms: checked.append(len(ms)) or valid(ms))
    await run_turn(agent, "hello again")
    # New since the last compile: the reply step's two messages (compiled by no request) and the user's; not the
    # held step's two, nor the whole window.
    assert [m.role for m in {id(m): m for m in rendered}.values()] == ["assistant", "tool", "user"]
    assert checked == [3]
