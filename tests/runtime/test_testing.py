"""The public test doubles (pagemind.runtime.testing) do what their documentation says."""

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from pagemind.runtime.model.client import ModelRequest
from pagemind.runtime.spec.agent import AgentSpec
from pagemind.runtime.testing.archival import RecordingArchival
from pagemind.runtime.testing.clock import ManualClock
from pagemind.runtime.testing.embedder import FakeEmbedder
from pagemind.runtime.testing.models import FunctionModel, ScriptedModel, by_purpose, is_pressure_alert
from pagemind.runtime.testing.responses import reply_body, tool_call_body
from pagemind.runtime.testing.specs import build_spec, spec_data
from pagemind.runtime.testing.step_context import tool_context
from pagemind.runtime.trace.reader import read_trace
from pagemind.tools import ArchivalMemory

TRACES = Path(__file__).parents[1] / "traces"


def request(purpose: str = "step", *messages: dict) -> ModelRequest:
    return ModelRequest("m", list(messages) or [{"role": "user", "content": "hi"}], [], 0.0, 10, purpose=purpose)


def test_the_clock_moves_only_when_told():
    clock = ManualClock()
    assert clock() == clock() == datetime(2026, 11, 29, 15, 0, tzinfo=UTC)
    assert clock.advance(days=1, hours=2) == clock() == datetime(2026, 11, 30, 17, 0, tzinfo=UTC)
    assert clock.advance(timedelta(minutes=5), seconds=1) == datetime(2026, 11, 30, 17, 5, 1, tzinfo=UTC)
    clock.now = datetime(2026, 1, 1, tzinfo=UTC)
    assert clock() == datetime(2026, 1, 1, tzinfo=UTC)


async def test_scripted_model_serves_in_order_and_fails_loudly_when_out():
    model = ScriptedModel([reply_body("one")])
    model.add(tool_call_body("send_message", {"message": "two"}, "c2"))
    assert (await model.complete(request())).content == "one"
    assert [c.id for c in (await model.complete(request())).tool_calls] == ["c2"]
    with pytest.raises(AssertionError, match="no response left for request #3"):
        await model.complete(request())
    assert len(model.requests) == 3


async def test_function_model_takes_sync_or_async_functions_and_routes_by_purpose():
    async def step(r: ModelRequest) -> dict:
        return reply_body(f"step {len(model.requests)}")

    model = FunctionModel(by_purpose(step, summarize=lambda r: reply_body("S"), extract='{"facts": [1]}'))
    assert (await model.complete(request())).content == "step 1"
    assert (await model.complete(request("summarize"))).content == "S"
    assert (await model.complete(request("extract"))).content == '{"facts": [1]}'
    defaults = FunctionModel(by_purpose(lambda r: reply_body("x")))
    assert json.loads((await defaults.complete(request("extract"))).content) == {"facts": []}


def test_a_pressure_alert_is_told_apart_from_the_closing_restatement():
    alert = {"role": "system", "content": "[system alert] the window is 72% full"}
    closing = {"role": "system", "content": "Never suggest peanuts."}
    first = {"role": "system", "content": "prompt"}
    user = {"role": "user", "content": "hi"}
    assert is_pressure_alert(request("step", first, user, alert, closing))
    assert is_pressure_alert(request("step", first, user, alert))
    assert not is_pressure_alert(request("step", first, user, closing))


def test_fake_embedder_serves_chosen_vectors_and_repeats_the_others():
    chosen = np.eye(64, dtype=np.float32)[0]
    embedder = FakeEmbedder({"tea": chosen})
    first = embedder.embed(["tea", "coffee"])
    again = FakeEmbedder().embed(["coffee"])
    assert np.array_equal(first[0], chosen) and np.array_equal(first[1], again[0])
    assert not first[1][:32].any() and np.isclose(np.linalg.norm(first[1]), 1)  # the upper half only
    assert embedder.texts == ["tea", "coffee"] and embedder.calls == 1
    assert embedder.embed([]).shape == (0, 64)
    assert FakeEmbedder(dim=8, model_id="other").embed(["x"]).shape == (1, 8)


async def test_recording_archival_is_an_archival_memory_that_keeps_what_it_gets():
    archival = RecordingArchival()
    assert isinstance(archival, ArchivalMemory)
    result = await archival.insert("Lin likes tea", kind="preference", importance=0.7)
    assert (result.action, result.id, result.kind) == ("inserted", "1", "preference")
    assert archival.inserted == [{"content": "Lin likes tea", "kind": "preference", "importance": 0.7}]
    assert await archival.search("tea") == [] and archival.stats() == (1, ())
    context = tool_context("alice", archival=archival, clock=ManualClock())
    assert (context.agent_name, context.archival, context.now()) == ("alice", archival, ManualClock()())


def test_the_spec_builder_reproduces_the_suites_agent_and_the_recorded_traces_agent():
    assert spec_data() == {
        "name": "tester",
        "model": {"name": "gpt-4o-mini", "context_window": 8192, "max_output_tokens": 256},
        "system": "You are a test agent.",
        "blocks": [
            {"label": "persona", "value": "I am a careful tester.", "limit": 200, "description": "Who I am."},
            {"label": "human", "value": "", "limit": 100, "description": "What I know about the user."},
            {"label": "constraints", "value": "Never suggest peanuts.", "limit": 200, "read_only": True},
        ],
        "max_steps_per_turn": 4,
    }
    from tests.traces.record import SPEC

    recorded = read_trace(TRACES / "core_memory_turn.jsonl").header.spec
    assert AgentSpec.model_validate(SPEC) == AgentSpec.model_validate(recorded)  # fields added since take defaults
    assert build_spec("tracer").name == "tracer"
    assert spec_data(tools=["send_message"])["tools"] == ["send_message"]
