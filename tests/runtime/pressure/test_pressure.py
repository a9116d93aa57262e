"""The pressure monitor end to end, with scripted models."""

import dataclasses
import json
from typing import Any

import pytest

from pagemind.runtime.agent import Agent
from pagemind.runtime.budget import read_pressure, usable_window
from pagemind.runtime.compiler import request_tokens as body_tokens
from pagemind.runtime.events import RuntimeEventBase
from pagemind.runtime.loop import run_turn
from pagemind.runtime.messages import Message
from pagemind.runtime.model.client import ModelRequest
from pagemind.runtime.observer import NullObserver
from pagemind.runtime.pressure.history_repair import MISSING_RESULT
from pagemind.runtime.pressure.monitor import updated_correction
from pagemind.runtime.pressure.pinned import ContextOverflow
from pagemind.runtime.pressure.summarizer import summarize
from pagemind.runtime.spec.agent import AgentSpec
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.archival import RecordingArchival
from pagemind.runtime.testing.endpoint import http_error
from pagemind.runtime.testing.models import FunctionModel, by_purpose
from pagemind.runtime.testing.responses import reply_body, tool_call_body
from pagemind.runtime.testing.specs import spec_data
from pagemind.runtime.tokens import count_tokens
from pagemind.runtime.turn_outcomes import StopReason
from pagemind.tools import BUILTIN_TOOLS, ToolCall, dispatch_tool_calls

SMALL = spec_data(model_name="m", context_window=4000, max_output_tokens=500, max_steps_per_turn=3)


def small_spec(**memory: Any) -> AgentSpec:
    return AgentSpec.model_validate({**SMALL, "memory": memory})


class EventLog(NullObserver, list):
    """Observes a turn and keeps the runtime events (warnings, flushes, repairs) as (kind, data) pairs."""

    def on_event(self, event) -> None:
        if isinstance(event, RuntimeEventBase):
            self.append((event.kind, dataclasses.asdict(event.data)))


def request_tokens(request: ModelRequest) -> int:
    return body_tokens(request.messages, request.tools)


def check_tool_pairs(messages: list[dict]) -> None:
    open_calls: set[str] = set()
    for m in messages:
        if m["role"] == "tool":
            assert m["tool_call_id"] in open_calls, "a result without its call"
            open_calls.discard(m["tool_call_id"])
        else:
            assert not open_calls, "a call without its result"
            open_calls = {c["id"] for c in m.get("tool_calls") or []}
    assert not open_calls


def conversation_model() -> FunctionModel:
    """Answers agent steps (a memory edit every 5th turn, then send_message), summaries and extractions."""
    turn = summaries = 0

    def step(request: ModelRequest) -> dict:
        nonlocal turn
        last = request.messages[-2] if request.messages[-1]["role"] == "system" else request.messages[-1]
        if last["role"] == "user":
            turn += 1
            if turn % 5 == 0:
                return tool_call_body("memory_rethink", {"label": "human", "new_value": f"Lin, turn {turn}"})
        return tool_call_body("send_message", {"message": f"Reply to turn {turn}: that sounds lovely."})

    def summarize(request: ModelRequest) -> dict:
        nonlocal summaries
        summaries += 1
        return reply_body(f"Summary #{summaries}: Lin (allergic to peanuts) chatted about tea and hiking.")

    facts = json.dumps({"facts": [{"text": "Lin is allergic to peanuts", "importance": 0.9}]})
    return FunctionModel(by_purpose(step, summarize=summarize, extract=facts))


async def test_500_turns_in_a_4000_token_window(sqlite_url, clock):
    recorder = conversation_model()
    agent = await Agent.load(small_spec(), model=recorder, store=StateStore(make_engine(sqlite_url)), clock=clock)
    events = agent.observer = EventLog()

    await agent.send("Hi, I'm Lin. My passport number is X1234567.")
    for i in range(499):
        result = await run_turn(agent, f"Turn {i}: today I walked in the park and drank some green tea with friends.")
        assert result.stop_reason is StopReason.SEND_MESSAGE

    step_requests = [r for r in recorder.requests if r.purpose == "step"]
    limit = usable_window(agent.spec)
    for request in recorder.requests:
        assert request_tokens(request) <= limit
    for request in step_requests:
        check_tool_pairs(request.messages[1:])
        assert request.messages[0]["content"].startswith("<hard_constraints>")
        assert "Never suggest peanuts." in request.messages[-1]["content"]

    kinds = [k for k, _ in events]
    flushes = kinds.count("flush")
    assert flushes >= 5
    cycles = "".join("W" if k == "pressure_warning" else "F" for k in kinds if k in ("pressure_warning", "flush"))
    assert all(segment == "W" for segment in cycles.split("F")[1:-1]), cycles  # exactly one warning per cycle
    # The summary is made ahead (in the background, from the warning line on); once a flush installs it, every
    # later step request carries it.
    summarized = ["<conversation_summary>" in r.messages[0]["content"] for r in step_requests]
    first_flush = summarized.index(True)
    assert all(summarized[first_flush:])
    flush_data = [data for k, data in events if k == "flush"]
    assert all(data["ahead"] for data in flush_data), flush_data  # every flush used the work prepared ahead
    ahead = [data["action"] for k, data in events if k == "flush_ahead"]
    assert set(ahead) == {"started"} and len(ahead) in (flushes, flushes + 1)  # once per cycle, never discarded
    assert all(data["tokens_after"] < data["tokens_before"] for k, data in events if k == "flush")

    # The first message left the window long ago but is still in recall memory, found by conversation_search.
    everything = agent.store.all_messages(agent.record.id)
    passport = [m for m in everything if m.content and "X1234567" in m.content]
    assert passport and not passport[0].in_context
    [found] = await dispatch_tool_calls(
        [ToolCall("q", "conversation_search", '{"query": "passport number"}')],
        {"conversation_search": BUILTIN_TOOLS["conversation_search"]},
        agent.tool_context(agent.memory),
    )
    assert not found.is_error and "X1234567" in found.content
    assert len(agent.store.summaries(agent.record.id)) == flushes


async def test_summarizer_chunks_material_larger_than_its_window(clock):
    window, budget = 1200, 100
    messages = [
        Message("user", f"Message {i}: " + "details about the trip to Oslo and the museum. " * 12, clock())
        for i in range(40)
    ]
    model = FunctionModel(lambda r: reply_body("Folded: " + "the trip " * 30))
    result = await summarize(
        model.complete,
        model="m",
        old_summary="earlier things",
        evicted=messages,
        budget=budget,
        window=window,
        encoding="o200k_base",
    )
    assert result.chunks == len(model.requests) > 1
    assert all(request_tokens(r) <= window for r in model.requests)
    assert count_tokens(result.text) <= budget
    # Each chunk builds on the summary so far.
    assert "earlier things" in model.requests[0].messages[1]["content"]
    assert "Folded:" in model.requests[1].messages[1]["content"]


async def _agent_with_history(url: str, model: Any, clock, spec: AgentSpec, turns: int = 6) -> Agent:
    agent = await Agent.load(spec, model=model, store=StateStore(make_engine(url)), clock=clock)
    for i in range(turns):
        await agent.window.accept(Message("user", f"Old message {i} " + "about gardening " * 40, clock()))
        await agent.window.accept(Message("assistant", f"Old answer {i}", clock()))
    return agent


async def test_context_length_exceeded_flushes_and_retries_once(scripted_openai, sqlite_url, clock):
    scripted_openai.add(
        http_error(400, "This model's maximum context length is 2048 tokens.", code="context_length_exceeded"),
        reply_body("Summary: Lin gardens."),  # the forced flush's summary
        tool_call_body("send_message", {"message": "Back in business."}),
    )
    spec = small_spec(extraction=False)
    agent = await _agent_with_history(sqlite_url, scripted_openai.client(), clock, spec)
    before = len(agent.window.messages)
    result = await run_turn(agent, "hello?")
    assert result.reply == "Back in business."
    assert len(agent.window.messages) < before
    retry = scripted_openai.requests[2]["messages"]
    assert "Summary: Lin gardens." in retry[0]["content"]
    assert request_tokens(ModelRequest("m", retry, [], 0, 0)) < request_tokens(
        ModelRequest("m", scripted_openai.requests[0]["messages"], [], 0, 0)
    )


async def test_context_length_exceeded_twice_is_an_error(scripted_openai, sqlite_url, clock):
    from pagemind.runtime.model.client import ContextLengthExceeded

    overflow = http_error(400, "maximum context length is 10 tokens", code="context_length_exceeded")
    scripted_openai.add(overflow, reply_body("Summary."), overflow)
    agent = await _agent_with_history(sqlite_url, scripted_openai.client(), clock, small_spec(extraction=False))
    with pytest.raises(ContextLengthExceeded):
        await run_turn(agent, "hello?")


async def test_pinned_part_too_big_names_each_part_and_the_agent_recovers(sqlite_url, clock):
    blocks = spec_data()["blocks"]
    blocks[0] = {**blocks[0], "value": "I love long words. " * 150, "limit": 4000}
    tight = AgentSpec.model_validate({**SMALL, "blocks": blocks, "model": {**SMALL["model"], "context_window": 1800}})
    model = FunctionModel(lambda r: tool_call_body("send_message", {"message": "ok"}))
    store = StateStore(make_engine(sqlite_url))
    agent = await Agent.load(tight, model=model, store=store, clock=clock)
    with pytest.raises(ContextOverflow) as err:
        await run_turn(agent, "hi")
    assert "block:persona" in str(err.value) and "tools" in str(err.value) and "context_window 1800" in str(err.value)
    assert model.requests == []

    roomy = AgentSpec.model_validate({**SMALL, "blocks": blocks, "model": {**SMALL["model"], "context_window": 8000}})
    agent = await Agent.load(roomy, model=model, store=store, clock=clock)
    assert (await run_turn(agent, "hi again")).reply == "ok"


async def test_orphan_tool_call_is_repaired_before_the_call(scripted_openai, sqlite_url, clock):
    scripted_openai.add(tool_call_body("send_message", {"message": "recovered"}))
    store = StateStore(make_engine(sqlite_url))
    agent = await Agent.load(small_spec(), model=scripted_openai.client(), store=store, clock=clock)
    crashed = Message("assistant", None, clock(), tool_calls=(ToolCall("call_lost", "core_memory_append", "{}"),))
    await agent.window.accept(Message("user", "remember this", clock()))
    await agent.window.accept(crashed)  # the process died before the result was stored
    await agent.window.accept(Message("tool", "stray", clock(), tool_call_id="call_from_nowhere"))
    result = await run_turn(agent, "are you there?")
    assert result.reply == "recovered"
    sent = scripted_openai.requests[0]["messages"]
    check_tool_pairs(sent[1:])
    repaired = [m for m in sent if m.get("tool_call_id") == "call_lost"]
    assert repaired and repaired[0]["content"] == MISSING_RESULT
    assert all(m.get("tool_call_id") != "call_from_nowhere" for m in sent)
    reloaded = await Agent.load(small_spec(), store=store, clock=clock)
    assert [m.tool_call_id for m in reloaded.window.messages if m.role == "tool"][0] == "call_lost"


def extracting_model(answer: str) -> FunctionModel:
    """Summarises, extracts `answer`, and replies "ok" to agent steps."""
    return FunctionModel(
        by_purpose(
            lambda request: tool_call_body("send_message", {"message": "ok"}),
            summarize="Summary of gardening.",
            extract=answer,
        )
    )


@pytest.mark.parametrize(
    "answer, stored",
    [
        ("I could not find anything, sorry!", 0),
        ('{"facts": [], "preferences": [], "progress": [], "todos": []}', 0),
        (
            '```json\n{"facts": [{"text": "Lin moved to Oslo", "importance": 0.8, "date": "2026-05-01"}],'
            ' "todos": [{"text": "Call the dentist", "importance": 0.6, "date": "2026-12-02"}]}\n```',
            2,
        ),
    ],
)
async def test_extraction_on_eviction(answer, stored, sqlite_url, clock):
    model = extracting_model(answer)
    agent = await _agent_with_history(sqlite_url, model, clock, small_spec(), turns=30)
    agent.archival = RecordingArchival()
    events = agent.observer = EventLog()
    result = await run_turn(agent, "hi")
    assert result.reply == "ok"
    [flush] = [data for kind, data in events if kind == "flush"]
    assert flush["extracted"] == stored
    assert flush["extraction"] == {0: "unparseable" if "sorry" in answer else "empty", 2: "stored"}[stored]
    assert agent.window.summary == "Summary of gardening."
    inserted = agent.archival.inserted
    assert len(inserted) == stored
    if stored:
        assert inserted[0] == {
            "content": "Lin moved to Oslo (date: 2026-05-01)",
            "kind": "fact",
            "importance": 0.8,
            "source_message_ids": inserted[0]["source_message_ids"],
        }
        assert inserted[1]["kind"] == "todo" and "2026-12-02" in inserted[1]["content"]
        assert inserted[0]["source_message_ids"]


def test_pressure_lines_and_correction_factor():
    spec = small_spec(pressure={"warn": 0.6, "flush": 0.8, "target": 0.4})
    reading = read_pressure(2000, 1.0, spec)
    assert (reading.usable, reading.warn_at, reading.flush_at, reading.target) == (3500, 2100, 2800, 1400)
    assert reading.level.value == "ok"
    assert read_pressure(2000, 1.1, spec).level.value == "warn"
    assert read_pressure(2000, 1.5, spec).level.value == "flush"
    assert updated_correction(1.0, 1000, 1500) == pytest.approx(1.1)
    assert updated_correction(1.0, 1000, None) == 1.0
    assert updated_correction(1.9, 100, 1000) == 2.0


def test_bad_pressure_config_is_rejected():
    with pytest.raises(ValueError, match="target"):
        small_spec(pressure={"target": 0.95})


async def test_extracted_facts_land_in_real_archival_memory_with_dates_and_importance(tmp_path, clock):
    from pagemind.runtime.process.settings import Settings

    answer = json.dumps(
        {
            "facts": [{"text": "Lin moved to Oslo", "importance": 0.8, "date": "2026-05-01"}],
            "todos": [{"text": "Lin must call the dentist", "importance": 0.6, "date": "2026-12-02"}],
        }
    )

    spec = AgentSpec.model_validate(
        {
            **SMALL,
            "tools": ["send_message", "archival_memory_insert", "archival_search"],
            "memory": {"prefetch_top_k": 0},
        }
    )
    settings = Settings(home=tmp_path, database_url=f"sqlite:///{tmp_path / 'x.db'}")
    agent = await Agent.load(spec, model=extracting_model(answer), settings=settings, clock=clock)
    for i in range(30):
        await agent.window.accept(Message("user", f"Old message {i} " + "about gardening " * 40, clock()))
    assert (await run_turn(agent, "hi")).reply == "ok"
    stored = {m.text: m for m in agent.archival.list()}
    assert stored["Lin moved to Oslo (date: 2026-05-01)"].importance == 0.8
    todo = stored["Lin must call the dentist (date: 2026-12-02)"]
    assert todo.kind == "todo" and todo.source_message_ids
