"""Flushes off the user's path (issue 11, item 4): from the warning line on, the next flush's summary and
extraction are prepared in the background, so the flush commits without waiting for a model; work the window
moved away from is discarded and done again; and what ends up in memory is the same as when the work is done
at the flush, in order (how replays run it)."""

from __future__ import annotations

import asyncio
import dataclasses
import json
from typing import Any

from pagemind.runtime.agent import Agent
from pagemind.runtime.events import FlushAheadEvent, FlushEvent, ModelRequestEvent, RuntimeEventBase
from pagemind.runtime.messages import Message
from pagemind.runtime.model.client import ModelRequest
from pagemind.runtime.observer import NullObserver
from pagemind.runtime.spec.agent import AgentSpec
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.archival import RecordingArchival
from pagemind.runtime.testing.clock import ManualClock
from pagemind.runtime.testing.models import FunctionModel, by_purpose
from pagemind.runtime.testing.responses import reply_body, tool_call_body
from pagemind.runtime.testing.specs import spec_data

SPEC = AgentSpec.model_validate(
    {**spec_data(model_name="m", context_window=4000, max_output_tokens=500), "memory": {"prefetch_top_k": 0}}
)
FACTS = json.dumps({"facts": [{"text": "Lin grows tomatoes", "importance": 0.8}]})


class Events(NullObserver, list):
    """Every event of the turns it watches."""

    def on_event(self, event) -> None:
        self.append(event)

    def of(self, kind: type) -> list:
        return [e for e in self if isinstance(e, kind)]


def step(request: ModelRequest) -> dict:
    return tool_call_body("send_message", {"message": "That sounds lovely; tell me more."})


def text(i: int) -> str:
    return f"Day {i}: in the garden I " + "planted tomatoes and watered the beans " * 8


async def load(url: str, model: FunctionModel, clock: ManualClock) -> tuple[Agent, Events, RecordingArchival]:
    agent = await Agent.load(SPEC, model=model, store=StateStore(make_engine(url)), clock=clock)
    agent.archival = archival = RecordingArchival()
    agent.observer = events = Events()
    return agent, events, archival


async def until(agent: Agent, events: Events, kind: type, start: int) -> int:
    """Send turns from `start` until an event of `kind` has been reported; the next turn's number."""
    for i in range(start, start + 60):
        await agent.send(text(i))
        if events.of(kind):
            return i + 1
    raise AssertionError(f"no {kind.__name__} in 60 turns")


async def test_the_flush_turn_waits_for_no_model(tmp_path, clock):
    asked, release = asyncio.Event(), asyncio.Event()

    async def summarize(request: ModelRequest) -> dict:
        asked.set()
        await release.wait()  # the summarizer answers only when the test says so
        return reply_body("Lin gardens: tomatoes and beans.")

    model = FunctionModel(by_purpose(step, summarize=summarize, extract=FACTS))
    agent, events, archival = await load(f"sqlite:///{tmp_path / 'a.db'}", model, clock)
    turn = await until(agent, events, FlushAheadEvent, 0)
    # The warning line was crossed and the turn ended although the summarizer has not answered.
    [started] = events.of(FlushAheadEvent)
    assert started.data.action == "started" and not events.of(FlushEvent)
    await asyncio.wait_for(asked.wait(), timeout=60)  # the background work is asking (a hang guard, not timing)
    release.set()
    await agent.monitor.settle()

    while not events.of(FlushEvent):
        before = len(model.requests)
        await agent.send(text(turn))
        turn += 1
    # The flush turn asked the model only for its own step: the summary and the extraction were ready.
    assert {r.purpose for r in model.requests[before:]} == {"step"}
    [flush] = events.of(FlushEvent)
    assert flush.data.ahead and flush.data.evicted == started.data.evicting
    assert (flush.data.extraction, flush.data.extracted) == ("stored", 1)
    assert agent.window.summary == "Lin gardens: tomatoes and beans."
    # The calls made ahead are reported at the flush, before it, summary first: a trace holds them in order.
    reported = [
        e.purpose for e in events[events.index(flush) - 4 : events.index(flush)] if isinstance(e, ModelRequestEvent)
    ]
    assert reported == ["summarize", "extract"]
    [inserted] = archival.inserted
    evicted = [m for m in agent.store.all_messages(agent.record.id) if not m.in_context]
    assert inserted["content"] == "Lin grows tomatoes" and inserted["source_message_ids"] == [m.id for m in evicted]
    assert len(evicted) == flush.data.evicted


def counting_model() -> FunctionModel:
    """Numbered summaries, and call ids numbered too (random ids would tokenize differently run to run)."""
    summaries = steps = 0

    def step(request: ModelRequest) -> dict:
        nonlocal steps
        steps += 1
        return tool_call_body("send_message", {"message": "That sounds lovely; tell me more."}, f"call_{steps:05d}")

    def summarize(request: ModelRequest) -> dict:
        nonlocal summaries
        summaries += 1
        return reply_body(f"Summary #{summaries} of: {request.messages[1]['content'][:80]}")

    return FunctionModel(by_purpose(step, summarize=summarize, extract=FACTS))


def behaviour(events: Events) -> list[Any]:
    """What a replay compares of the monitor's events, without machine timings."""
    return [
        (e.kind, {k: v for k, v in dataclasses.asdict(e.data).items() if not k.endswith("_ms")})
        if isinstance(e, RuntimeEventBase)
        else (e.type, getattr(e, "purpose", None))
        for e in events
    ]


async def test_ahead_or_in_order_the_memory_comes_out_the_same(tmp_path):
    results = []
    for concurrent in (True, False):
        clock = ManualClock()
        agent, events, archival = await load(f"sqlite:///{tmp_path / f'{concurrent}.db'}", counting_model(), clock)
        agent.monitor.concurrent = concurrent
        for i in range(80):
            clock.advance(minutes=5)
            await agent.send(text(i))
        store, agent_id = agent.store, agent.record.id
        results.append(
            {
                "summaries": [
                    (s.text, s.evicted_count, s.first_message_id, s.last_message_id) for s in store.summaries(agent_id)
                ],
                "window": [(m.role, m.content) for m in store.in_context_messages(agent_id)],
                "archival": archival.inserted,
                "events": behaviour(events),
            }
        )
    ahead, in_order = results
    assert len(ahead["summaries"]) >= 3
    assert sum(1 for kind, data in ahead["events"] if kind == "flush" and data["ahead"]) == len(ahead["summaries"])
    assert ahead == in_order


async def test_work_the_window_moved_away_from_is_discarded_and_redone(tmp_path, clock):
    model = counting_model()
    agent, events, _ = await load(f"sqlite:///{tmp_path / 'd.db'}", model, clock)
    turn = await until(agent, events, FlushAheadEvent, 0)
    # Another process flushed two messages meanwhile (this agent reads its window again before a turn).
    await agent.window.evict(2, "Summarised elsewhere.", 0, 0, clock())
    turn = await until(agent, events, FlushEvent, turn)
    started, discarded, restarted = events.of(FlushAheadEvent)
    assert (started.data.action, discarded.data.action, restarted.data.action) == ("started", "discarded", "started")
    assert discarded.data.reason == "the window changed"
    [flush] = events.of(FlushEvent)
    assert flush.data.ahead and flush.data.evicted == restarted.data.evicting
    # Only the work that was used is reported, and it folded the messages into the summary the window had.
    [used] = [e for e in events.of(ModelRequestEvent) if e.purpose == "summarize"]
    assert "Current summary:\nSummarised elsewhere." in used.body["messages"][1]["content"]
    assert agent.window.summary.startswith("Summary #2 of: Current summary:\nSummarised elsewhere.")


async def test_work_that_buys_too_little_room_is_not_used(tmp_path, clock):
    # A narrow swing (flush at 60 %, target 50 %): the work prepared for it cannot absorb a long message that
    # throws the window far past the flush line, so the flush plans and does the work again, on the path.
    narrow = SPEC.model_copy(
        update={
            "memory": SPEC.memory.model_copy(
                update={"pressure": SPEC.memory.pressure.model_copy(update={"warn": 0.4, "flush": 0.6, "target": 0.5})}
            )
        }
    )
    agent = await Agent.load(
        narrow, model=counting_model(), store=StateStore(make_engine(f"sqlite:///{tmp_path / 'n.db'}")), clock=clock
    )
    agent.observer = events = Events()
    await until(agent, events, FlushAheadEvent, 0)
    for part in (1, 2):  # left by a turn that failed after its user messages were stored, say
        await agent.window.accept(Message("user", f"Story, part {part}: " + "we drove along the fjord " * 200, clock()))
    await agent.send("And that was the trip.")
    [discarded] = [e for e in events.of(FlushAheadEvent) if e.data.action == "discarded"]
    assert discarded.data.reason == "not enough"
    [flush] = events.of(FlushEvent)
    assert not flush.data.ahead and flush.data.evicted > discarded.data.evicting
    assert flush.data.tokens_after < flush.data.tokens_before


def test_work_whose_event_loop_ended_is_started_again(tmp_path):
    # Each CLI command runs in its own `asyncio.run`, which cancels unfinished background work when it returns.
    calls = 0

    async def summarize(request: ModelRequest) -> dict:
        nonlocal calls
        calls += 1
        if calls == 1:
            await asyncio.Event().wait()  # never answers: still running when its event loop ends
        return reply_body(f"Summary #{calls}")

    model = FunctionModel(by_purpose(step, summarize=summarize, extract=FACTS))
    clock = ManualClock()
    url = f"sqlite:///{tmp_path / 'l.db'}"
    agent, events, _ = asyncio.run(load(url, model, clock))
    turn = asyncio.run(until(agent, events, FlushAheadEvent, 0))
    asyncio.run(until(agent, events, FlushEvent, turn))
    actions = [(e.data.action, e.data.reason) for e in events.of(FlushAheadEvent)]
    assert actions == [("started", ""), ("discarded", "its background run was stopped"), ("started", "")]
    [flush] = events.of(FlushEvent)
    assert flush.data.ahead and agent.window.summary == "Summary #2"
