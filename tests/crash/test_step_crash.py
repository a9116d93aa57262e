"""The step under `kill -9`: a child running keyed turns kills itself at a seeded point (runtime.process.crashpoints), then
the agent restarts, the same turns are retried with their keys and the next message is sent.

At every point, on SQLite and Postgres: no accepted message is lost or doubled, no block edit is applied twice (one
version per edit), no tool call is split from its result in the window, every turn completes exactly once and the
agent answers. Each turn of the child is two steps (append to a block, then send_message), so a point's second
pass is the next step or turn: `NAME@N` seeds the Nth pass of point NAME.
"""

from __future__ import annotations

import signal

import pytest

from pagemind.runtime.agent import Agent
from pagemind.runtime.messages import Message
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.models import FunctionModel, by_purpose
from pagemind.runtime.testing.specs import build_spec
from tests.runtime.state.test_turn_lock import children
from tests.support.turn_child import respond, spec_options

TURN_POINTS = ["turn.locked", "turn.begin", "accept.before_commit", "accept.after_commit", "turn.prefetch"]
STEP_POINTS = [
    "step.before_relieve",
    "step.before_model",
    "step.after_model",
    "dispatch.before_tools",
    "dispatch.after_tools",
    "commit.before",
    "commit.step_flushed",
    "commit.messages_flushed",
    "commit.before_commit",
    "commit.after_commit",
    "window.before_adopt",
    "commit.before_adopt_memory",
    "step.end",
]
# Turn points at the first and second turn; step points at the first two steps (append, then send_message), and
# the append step's dispatch (a tool reading the clock) of the first two turns.
SEEDS = (
    [f"{p}@{n}" for p in TURN_POINTS for n in (1, 2)]
    + [f"{p}@{n}" for p in STEP_POINTS for n in (1, 2)]
    + ["tool.clock@1", "tool.clock@2"]
)
TURNS = 3


def split_pairs(window: list[Message]) -> list[str]:
    """What breaks the tool-call pairing a strict provider requires: a call without its results right after it,
    or a result without the call just before."""
    problems, expected = [], set()
    for message in window:
        if message.role == "tool":
            if message.tool_call_id not in expected:
                problems.append(f"orphan result {message.tool_call_id}")
            expected.discard(message.tool_call_id)
            continue
        if expected:
            problems.append(f"calls without results {sorted(expected)}")
        expected = {c.id for c in message.tool_calls} if message.role == "assistant" else set()
    return problems + ([f"calls without results {sorted(expected)}"] if expected else [])


@pytest.mark.parametrize("seed", SEEDS, ids=lambda s: s.replace(".", "_").replace("@", "_"))
async def test_a_kill_anywhere_in_the_step_loses_and_doubles_nothing(database_url, seed, monkeypatch):
    spec = build_spec(**spec_options())
    store = StateStore(make_engine(database_url))
    agent_id = store.ensure_agent(spec).id
    monkeypatch.setenv("PAGEMIND_KILL_AT", seed)
    (child,) = children(database_url, "C", count=TURNS, key_prefix="k")
    monkeypatch.delenv("PAGEMIND_KILL_AT")
    out, err = child.communicate(timeout=300)
    assert child.returncode == -signal.SIGKILL, f"{seed} never fired: {err[-2000:]}"
    acknowledged = [line.split()[1] for line in out.splitlines() if line.startswith("ack ")]

    agent = await Agent.load(spec, model=FunctionModel(by_purpose(respond)), store=store)  # the restart
    replies = [await agent.send(f"C message {i}", idempotency_key=f"k-{i}") for i in range(TURNS)]
    assert replies == [f"ok C-{i}" for i in range(TURNS)]
    assert await agent.send("N message 9") == "ok N-9"

    log = store.all_messages(agent_id)
    users = [m.content for m in log if m.role == "user"]
    assert users == [f"C message {i}" for i in range(TURNS)] + ["N message 9"], seed
    assert store.load_core(agent_id, spec)[0][1].value.split() == [f"C-{i}" for i in range(TURNS)] + ["N-9"]
    assert store.block_versions(agent_id)["human"] == TURNS + 1
    assert len(store.block_history(agent_id, "human")) == TURNS + 1
    finals = [s.turn_id for s in store.steps(agent_id) if s.stop_reason is not None]
    assert len(finals) == len(set(finals)) == TURNS + 1  # every turn completed, once
    assert not split_pairs(store.in_context_messages(agent_id)), seed
    assert all(f"C-{i}" in acknowledged[i] for i in range(len(acknowledged)))


AFTER_ACCEPT = [
    "accept.after_commit@1",
    "turn.prefetch@1",
    "step.after_model@1",
    "tool.clock@1",
    "commit.before_commit@1",
    "commit.after_commit@1",
    "step.after_model@2",
]


@pytest.mark.parametrize("seed", AFTER_ACCEPT, ids=lambda s: s.replace(".", "_").replace("@", "_"))
async def test_without_a_key_the_next_message_follows_the_accepted_one(database_url, seed, monkeypatch):
    """No key, no retry: the killed turn's accepted message stays (in the log and the window), once, and the
    agent answers the next message with its window intact."""
    spec = build_spec(**spec_options())
    store = StateStore(make_engine(database_url))
    agent_id = store.ensure_agent(spec).id
    monkeypatch.setenv("PAGEMIND_KILL_AT", seed)
    (child,) = children(database_url, "C", count=1)
    monkeypatch.delenv("PAGEMIND_KILL_AT")
    child.communicate(timeout=300)
    assert child.returncode == -signal.SIGKILL, seed

    agent = await Agent.load(spec, model=FunctionModel(by_purpose(respond)), store=store)
    assert await agent.send("N message 9") == "ok N-9"
    users = [m.content for m in store.all_messages(agent_id) if m.role == "user"]
    assert users == ["C message 0", "N message 9"]
    assert [m.content for m in store.in_context_messages(agent_id) if m.role == "user"] == users
    human = store.load_core(agent_id, spec)[0][1].value.split()
    assert human.count("C-0") <= 1 and human.count("N-9") == 1
    assert store.block_versions(agent_id)["human"] == len(store.block_history(agent_id, "human")) == len(human)
    assert not split_pairs(store.in_context_messages(agent_id)), seed
