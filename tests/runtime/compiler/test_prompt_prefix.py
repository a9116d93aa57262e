"""Providers cache a prompt's exact prefix: between flushes and core-memory edits, every step's request starts with
the whole of the previous one but its closing message (issue #37). A conversation with the shipped companion, a
scripted model that files memories and edits core memory, and a window small enough to flush."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

from pagemind.runtime.agent import Agent
from pagemind.runtime.model.client import ModelRequest
from pagemind.runtime.spec.agent import AgentSpec
from pagemind.runtime.spec.loading import load_spec
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.clock import ManualClock
from pagemind.runtime.testing.models import FunctionModel, by_purpose
from pagemind.runtime.testing.responses import Body, tool_call_body

ROOT = Path(__file__).parents[3]
CHAT = "Today I walked along the harbour and the light on the water was lovely; I keep thinking about the seasons."


def step(request: ModelRequest) -> Body:
    chat = [m for m in request.messages if m["role"] != "system"]
    if chat[-1]["role"] == "tool":
        return tool_call_body("send_message", {"message": "I hear you."})
    turn = sum(1 for m in chat if m["role"] == "user")
    if turn % 7 == 0:
        return tool_call_body("core_memory_append", {"label": "human", "content": f"Fact {turn}."})
    if turn % 3 == 0:
        return tool_call_body("archival_memory_insert", {"content": f"The user walked by the harbour ({turn})."})
    return tool_call_body("send_message", {"message": "Tell me more."})


async def test_a_request_starts_with_the_previous_one_but_its_closing_message(tmp_path):
    shipped = load_spec(ROOT / "runtime" / "data" / "agents" / "companion.yaml")
    spec = AgentSpec.model_validate(
        {**shipped.model_dump(), "model": {**shipped.model.model_dump(), "context_window": 6000}}
    )
    model = FunctionModel(by_purpose(step))
    start = datetime(2026, 3, 2, 8, tzinfo=UTC)
    clock = ManualClock(start)
    store = StateStore(make_engine(f"sqlite:///{tmp_path / 'p.db'}"))
    agent = await Agent.load(spec, model=model, store=store, clock=clock)
    for n in range(40):
        clock.now = start + timedelta(minutes=7 * n)
        await agent.send(f"{CHAT} ({n})")
    agent.monitor.cancel()
    requests = [r for r in model.requests if r.purpose == "step"]
    kept = changed = 0
    for before, after in zip(requests, requests[1:], strict=False):
        assert after.tools == before.tools  # the schemas come first and never change
        assert after.messages[-1]["role"] == "system" and "<memory_stats>" in after.messages[-1]["content"]
        if after.messages[0] != before.messages[0]:
            changed += 1  # a flush or an edit changed the system message: the cache breaks there, as it must
            continue
        kept += 1
        assert after.messages[: len(before.messages) - 1] == before.messages[:-1]
    assert kept > 3 * changed > 0  # the test saw both kinds, and mostly requests that keep the prefix
    flushes = [r for r in model.requests if r.purpose == "summarize"]
    assert flushes  # the window was small enough to flush


async def test_the_time_is_stated_once_per_turn(tmp_path):
    shipped = load_spec(ROOT / "runtime" / "data" / "agents" / "companion.yaml")
    clock = ManualClock(datetime(2026, 3, 2, 8, tzinfo=UTC))

    def moving(request: ModelRequest) -> Body:
        clock.advance(minutes=5)  # every model call takes five minutes of the agent's clock
        return step(request)

    model = FunctionModel(by_purpose(moving))
    store = StateStore(make_engine(f"sqlite:///{tmp_path / 'p.db'}"))
    agent = await Agent.load(shipped, model=model, store=store, clock=clock)
    for _ in range(3):  # the third turn files a memory: two steps
        await agent.send(CHAT)
    first, second = [r for r in model.requests if r.purpose == "step"][-2:]
    time_line = [line for line in first.messages[-1]["content"].splitlines() if line.startswith("Current time")]
    assert time_line and time_line == [
        line for line in second.messages[-1]["content"].splitlines() if line.startswith("Current time")
    ]
