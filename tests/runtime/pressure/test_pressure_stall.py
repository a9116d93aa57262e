"""The pressure monitor cannot stall or thrash: a bad extracted item, a clipped message, a window whose pinned part
leaves no room (issue 10, item 6)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from pagemind.runtime.agent import Agent
from pagemind.runtime.budget import max_message_tokens, read_pressure
from pagemind.runtime.events import FlushEvent, PressureSqueezedEvent, PressureWarningEvent
from pagemind.runtime.messages import Message
from pagemind.runtime.model.client import ModelRequest
from pagemind.runtime.observer import NullObserver
from pagemind.runtime.process.settings import Settings
from pagemind.runtime.spec.agent import AgentSpec
from pagemind.runtime.spec.loading import load_spec
from pagemind.runtime.testing.models import FunctionModel, by_purpose
from pagemind.runtime.testing.responses import tool_call_body
from pagemind.runtime.testing.specs import spec_data

COMPANION = Path(__file__).parents[3] / "agents" / "companion.yaml"


class Events(NullObserver, list):
    """Keeps every event of the turns it watches."""

    def on_event(self, event) -> None:
        self.append(event)

    def of(self, kind: type) -> list:
        return [e for e in self if isinstance(e, kind)]


def replying(extract: str = '{"facts": []}', requests: list[ModelRequest] | None = None) -> FunctionModel:
    def step(request: ModelRequest) -> dict:
        if requests is not None:
            requests.append(request)
        return tool_call_body("send_message", {"message": "That sounds lovely; tell me more about your day."})

    return FunctionModel(by_purpose(step, summarize="Lin talked about walks and dinners.", extract=extract))


async def test_one_bad_extracted_item_is_skipped_and_the_flush_commits(tmp_path, clock):
    answer = json.dumps({"facts": [{"text": "   "}, {"text": "x" * 5000}, {"text": "Lin lives in Oslo"}]})
    spec = AgentSpec.model_validate(
        {
            **spec_data(model_name="m", context_window=4000, max_output_tokens=500),
            "tools": ["send_message", "archival_memory_insert"],
            "memory": {"prefetch_top_k": 0},
        }
    )
    settings = Settings(home=tmp_path, database_url=f"sqlite:///{tmp_path / 'x.db'}")
    agent = await Agent.load(spec, model=replying(answer), settings=settings, clock=clock)
    for i in range(45):
        await agent.window.accept(Message("user", f"Old message {i} " + "about gardening " * 40, clock()))
    events = agent.observer = Events()

    assert (await agent.send("hi")) is not None
    [flush] = events.of(FlushEvent)
    assert (flush.data.extraction, flush.data.extracted) == ("stored", 1)
    assert [m.text for m in agent.archival.list()] == ["Lin lives in Oslo"]
    reloaded = await Agent.load(spec, model=replying(), settings=settings, clock=clock)
    assert reloaded.window.summary == "Lin talked about walks and dinners."  # the eviction committed
    assert (await reloaded.send("and now?")) is not None  # later turns work


async def manual_and_notes(sqlite_url: str, clock, notes: int) -> tuple[AgentSpec, Agent]:
    """A 4,000-token agent whose window holds a manual far longer than a message may be (clipped in the prompt)
    and `notes` shorter user messages."""
    spec = AgentSpec.model_validate(spec_data(model_name="m", context_window=4000, max_output_tokens=500))
    agent = await Agent.load(
        spec,
        model=replying(),
        clock=clock,
        settings=Settings(home=Path(sqlite_url[10:]).parent, database_url=sqlite_url),
    )
    await agent.window.accept(Message("user", "Here is the whole manual: " + "lorem ipsum dolor " * 3000, clock()))
    for i in range(notes):
        await agent.window.accept(Message("user", f"Note {i} " + "about gardening " * 40, clock()))
    return spec, agent


async def test_eviction_counts_a_clipped_message_as_the_compiler_does(sqlite_url, clock):
    spec, agent = await manual_and_notes(sqlite_url, clock, 28)
    compiled = agent.compile()
    assert compiled.sections["messages"] < 29 * max_message_tokens(spec)  # the manual is clipped in the prompt
    events = agent.observer = Events()

    await agent.send("hi")
    [flush] = events.of(FlushEvent)
    reading = read_pressure(agent.compile().total_tokens, agent.window.correction, spec)
    assert flush.data.enough and reading.tokens < reading.warn_at  # the flush did what it said
    [summary] = agent.store.summaries(agent.record.id)
    assert 0 <= summary.tokens_after < summary.tokens_before
    assert abs(summary.tokens_after - flush.data.tokens_after) < 0.1 * summary.tokens_before


async def test_a_window_whose_pinned_part_leaves_no_room_flushes_rarely_and_says_so_once(sqlite_url, clock):
    spec = load_spec(COMPANION)
    # The pinned part just fits: the window is what the empty agent's prompt takes, the output reserve, and room
    # for about five turns.
    sizing = await Agent.load(
        spec,
        model=replying(),
        clock=clock,
        settings=Settings(
            home=Path(sqlite_url[10:]).parent, database_url=f"sqlite:///{Path(sqlite_url[10:]).parent / 'sizing.db'}"
        ),
    )
    window = sizing.compile().total_tokens + spec.model.max_output_tokens + 310
    spec = spec.model_copy(update={"model": spec.model.model_copy(update={"context_window": window})})
    requests: list[ModelRequest] = []
    agent = await Agent.load(
        spec,
        model=replying(requests=requests),
        clock=clock,
        settings=Settings(home=Path(sqlite_url[10:]).parent, database_url=sqlite_url),
    )
    events = agent.observer = Events()
    flushed_turns = []
    for turn in range(80):
        clock.advance(minutes=5)
        before = len(events.of(FlushEvent))
        await agent.send(f"Turn {turn}: I walked by the river, then cooked dinner with my friend Sam.")
        if len(events.of(FlushEvent)) > before:
            flushed_turns.append(turn)

    assert 1 <= len(flushed_turns) <= 80 // 5
    assert all(b - a >= 5 for a, b in zip(flushed_turns, flushed_turns[1:]))
    [told] = events.of(PressureSqueezedEvent)
    assert told.data.room < told.data.needed and told.data.pinned["tools"] > 0
    assert events.of(PressureWarningEvent) == []
    for request in requests:  # every request fits the context window with its reply
        prompt = math.ceil(agent.window.correction * _tokens(request))
        assert prompt + request.max_tokens <= spec.model.context_window


def _tokens(request: ModelRequest) -> int:
    from pagemind.runtime.compiler import request_tokens

    return request_tokens(request.messages, request.tools)


async def test_the_room_a_flush_could_buy_is_every_group_but_the_newest(sqlite_url, clock):
    """`room` takes the messages' tokens from the compiled context instead of summing the window again: the same
    figure as summing every atomic group but the newest, a clipped message and a trailing tool group included."""
    from pagemind.runtime.budget import squeeze
    from pagemind.runtime.compiler import message_tokens
    from pagemind.runtime.pressure.eviction import atomic_groups
    from pagemind.runtime.tokens import DEFAULT_ENCODING
    from pagemind.tools import ToolCall

    spec, agent = await manual_and_notes(sqlite_url, clock, 6)
    calls = (ToolCall("c1", "archival_search", "{}"), ToolCall("c2", "archival_search", "{}"))
    newest = [
        Message("assistant", None, clock(), tool_calls=calls),
        Message("tool", "found " * 50, clock(), tool_call_id="c1"),
        Message("tool", "found " * 70, clock(), tool_call_id="c2"),
    ]
    agent.window.messages.extend(newest)  # in memory only: what the monitor reads

    compiled = agent.compile()
    reading = read_pressure(compiled.total_tokens, agent.window.correction, spec)
    messages = agent.window.messages
    evictable = sum(
        message_tokens(m, spec.model.encoding or DEFAULT_ENCODING, max_message_tokens(spec))
        for start, end in atomic_groups(messages)[:-1]
        for m in messages[start:end]
    )
    expected = squeeze(reading, reading.tokens - math.ceil(evictable * agent.window.correction), spec)
    assert agent.monitor.room(reading, compiled) == expected
    assert evictable < compiled.sections["messages"]  # the newest group is left out of it
