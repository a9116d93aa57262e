"""Replay: identical runs, the first divergence, truncated traces, unused responses, forks."""

import json
from datetime import timedelta
from pathlib import Path

import pytest

import pagemind.runtime.compiler as compiler
from pagemind.runtime.agent import Agent
from pagemind.runtime.loop import run_turn
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.clock import ManualClock
from pagemind.runtime.testing.models import ScriptedModel
from pagemind.runtime.testing.responses import tool_call_body
from pagemind.runtime.testing.specs import build_spec
from pagemind.runtime.trace.reader import read_trace
from pagemind.runtime.trace.recorder import record
from pagemind.runtime.trace.replay import ReplayError, format_report, replay
from pagemind.tools import tool
from tests.runtime.trace.test_trace import SCRIPT, record_turn
from tests.traces.record import pressure_flush

LOOKUP_ANSWERS = {"weather": "sunny"}


@tool(read_only=True)
def lookup(topic: str) -> str:
    """Look something up.

    Args:
        topic: What to look up.
    """
    return f"{topic}: {LOOKUP_ANSWERS.get(topic, 'unknown')}"


def rewrite(path: Path, out: Path, index: int, change) -> Path:
    """A copy of the trace with line `index` (0-based) changed by `change(dict)`."""
    lines = path.read_text().splitlines()
    event = json.loads(lines[index])
    change(event)
    lines[index] = json.dumps(event)
    out.write_text("\n".join(lines) + "\n")
    return out


@pytest.fixture
async def recorded(scripted_openai, make_agent, sqlite_url, tmp_path) -> Path:
    """A recorded three-step turn (append, replace, send_message) through the mocked HTTP endpoint."""
    scripted_openai.add(*SCRIPT)
    path = tmp_path / "turn.jsonl"
    await record_turn(make_agent, sqlite_url, scripted_openai.client(), path)
    return path


async def test_replay_of_a_recorded_multi_step_turn_is_identical(recorded):
    report = await replay(read_trace(recorded))
    assert (report.status, report.exit_code, report.steps) == ("identical", 0, 3)
    assert "identical: 1 turn(s), 3 step(s)" in format_report(report)


async def test_replay_never_touches_the_agents_real_memory(recorded, sqlite_url):
    store = StateStore(make_engine(sqlite_url))
    agent_id = store.get_agent("tester").id
    spec = build_spec()
    before = (store.message_count(agent_id), [b.value for b in store.load_blocks(agent_id, spec)])
    assert (await replay(read_trace(recorded))).status == "identical"
    after = (store.message_count(agent_id), [b.value for b in store.load_blocks(agent_id, spec)])
    assert before == after


async def test_a_changed_block_in_the_snapshot_diverges_at_the_first_request(recorded, tmp_path):
    def change(header):
        persona = next(b for b in header["snapshot"]["blocks"] if b["label"] == "persona")
        persona["value"] = "I am a careless tester."

    report = await replay(read_trace(rewrite(recorded, tmp_path / "changed.jsonl", 0, change)))
    assert (report.status, report.exit_code) == ("diverged", 1)
    d = report.divergence
    assert (d.index, d.line, d.where) == (1, 3, "turn 1 step 1 (step 1 of the trace)")
    assert d.what == "model_request: the prompt differs"
    assert "-I am a careful tester.\n+I am a careless tester." in d.detail
    assert d.detail.startswith("--- recorded\n+++ replay")
    text = format_report(report)
    assert text.startswith("DIVERGED at event 2 of 18 (changed.jsonl:3), turn 1 step 1")


async def test_a_changed_tool_result_diverges_at_that_result(recorded, tmp_path):
    lines = recorded.read_text().splitlines()
    index = next(i for i, line in enumerate(lines) if '"type":"tool_result"' in line and '"step":2' in line)

    def change(event):
        event["content"] = "Replaced. Block 'human' now holds 99/100 characters."

    report = await replay(read_trace(rewrite(recorded, tmp_path / "changed.jsonl", index, change)))
    d = report.divergence
    assert report.exit_code == 1 and d.line == index + 1
    assert d.where == "turn 1 step 2 (step 2 of the trace)"
    assert d.what.startswith("tool_result core_memory_replace") and d.what.endswith("content differs")
    assert "expected: \"Replaced. Block 'human' now holds 99/100 characters.\"" in d.detail
    assert "actual:   \"Replaced. Block 'human' now holds 35/100 characters.\"" in d.detail


async def test_a_tool_that_now_answers_differently_diverges_at_its_result(tmp_path, clock):
    spec = build_spec(tools=["send_message", "tests.runtime.trace.test_replay:lookup"])
    model = ScriptedModel(
        [tool_call_body("lookup", {"topic": "weather"}), tool_call_body("send_message", {"message": "It is sunny."})]
    )
    agent = await Agent.load(
        spec, model=model, store=StateStore(make_engine(f"sqlite:///{tmp_path / 'a.db'}")), clock=clock
    )
    record(agent, path=tmp_path / "lookup.jsonl")
    await run_turn(agent, "Weather?")
    assert (await replay(read_trace(tmp_path / "lookup.jsonl"), trust_tools=True)).status == "identical"

    LOOKUP_ANSWERS["weather"] = "rainy"  # the tool's behaviour changed since the recording
    try:
        untrusted = await replay(read_trace(tmp_path / "lookup.jsonl"))  # recorded results: the change is unseen
        report = await replay(read_trace(tmp_path / "lookup.jsonl"), trust_tools=True)
    finally:
        LOOKUP_ANSWERS["weather"] = "sunny"
    assert untrusted.status == "identical" and untrusted.untrusted == ("tests.runtime.trace.test_replay:lookup",)
    d = report.divergence
    assert d.what == "tool_result lookup (%s): content differs" % d.what.split("(")[1].split(")")[0]
    assert "expected: 'weather: sunny'\nactual:   'weather: rainy'" == d.detail


async def test_a_changed_section_rendering_diverges_with_a_unified_diff(recorded, monkeypatch):
    original = compiler.render_stats
    monkeypatch.setattr(compiler, "render_stats", lambda stats: original(stats).replace("Current time", "Time now"))
    report = await replay(read_trace(recorded))
    d = report.divergence
    assert report.exit_code == 1 and d.index == 1 and d.what == "model_request: the prompt differs"
    assert "\n-Current time: 2026-11-29 15:00 UTC (Sunday)\n+Time now: 2026-11-29 15:00 UTC (Sunday)" in d.detail


async def test_a_truncated_trace_replays_up_to_its_last_complete_step(recorded, tmp_path):
    data = recorded.read_bytes()
    lines = data.splitlines(keepends=True)
    step_ends = [i for i, line in enumerate(lines) if b'"type":"step_end"' in line]
    # Killed mid-step 2: its request and response were written, and half of its tool call line.
    cut = b"".join(lines[: step_ends[0] + 3]) + lines[step_ends[0] + 3][:40]
    truncated = tmp_path / "truncated.jsonl"
    truncated.write_bytes(cut)

    trace = read_trace(truncated)
    assert not trace.complete and trace.steps == [(1, 1)] and trace.dropped == 3
    report = await replay(trace)
    assert (report.status, report.exit_code, report.steps) == ("truncated", 0, 1)
    assert format_report(report) == (
        "truncated trace: the trace ends after turn 1 step 1 (step 1 of the trace); 3 unfinished event(s) after "
        "it were left out. Replayed 1 step(s) up to there: identical to the recording."
    )


async def test_a_truncated_trace_still_reports_a_divergence_before_its_end(recorded, tmp_path, monkeypatch):
    lines = recorded.read_bytes().splitlines(keepends=True)
    (tmp_path / "t.jsonl").write_bytes(b"".join(lines[:10]))  # step 1 whole, step 2 cut off
    monkeypatch.setattr(compiler, "_MEMORY_PREAMBLE", "Your memory.")
    report = await replay(read_trace(tmp_path / "t.jsonl"))
    assert report.status == "diverged" and report.divergence.what == "model_request: the prompt differs"


async def test_a_recorded_response_left_unused_is_a_divergence(scripted_openai, make_agent, sqlite_url, tmp_path):
    scripted_openai.add(
        tool_call_body("send_message", {"message": "one"}), tool_call_body("send_message", {"message": "two"})
    )
    agent = await make_agent(sqlite_url, scripted_openai.client())
    path = tmp_path / "two.jsonl"
    recorder = record(agent, path=path)
    await run_turn(agent, "first")
    await run_turn(agent, "second")
    recorder.close()
    assert (await replay(read_trace(path))).status == "identical"

    # Without the second turn's user message the replay stops after turn 1: turn 2's response goes unused.
    lines = path.read_text().splitlines()
    (tmp_path / "dropped.jsonl").write_text("\n".join(l for l in lines if '"user_message":"second"' not in l) + "\n")
    report = await replay(read_trace(tmp_path / "dropped.jsonl"))
    d = report.divergence
    assert report.exit_code == 1
    assert d.what == "the replay ended but the recording goes on with model_request (5 recorded event(s) left unused)"


async def test_multi_turn_traces_replay_the_recorded_clock(scripted_openai, make_agent, sqlite_url, tmp_path, clock):
    scripted_openai.add(
        tool_call_body("core_memory_append", {"label": "human", "content": "Lin"}),
        tool_call_body("send_message", {"message": "hi"}),
        tool_call_body("send_message", {"message": "again"}),
    )
    agent = await make_agent(sqlite_url, scripted_openai.client())
    path = tmp_path / "days.jsonl"
    recorder = record(agent, path=path)
    await run_turn(agent, "monday")
    clock.advance(days=1, hours=3, minutes=7)
    await run_turn(agent, "tuesday")
    recorder.close()
    second_day = read_trace(path).events[-5]
    assert "2026-11-30 18:07" in second_day.body["messages"][-1]["content"]  # the turn's time closes the prompt
    report = await replay(read_trace(path))
    assert (report.status, report.steps) == ("identical", 3)


async def test_fork_serves_recorded_steps_then_the_live_model(recorded, tmp_path):
    live = ScriptedModel([tool_call_body("send_message", {"message": "A different ending."})])
    fork_path = tmp_path / "fork.jsonl"
    report = await replay(read_trace(recorded), live=live, from_step=3, record_to=fork_path)
    assert (report.status, report.exit_code, report.steps) == ("forked", 0, 2)
    assert len(live.requests) == 1  # only step 3 went to the live model

    fork = read_trace(fork_path)
    assert fork.header.parent.trace == str(recorded) and fork.header.parent.from_step == 3
    assert fork.complete and fork.steps == [(1, 1), (1, 2), (1, 3)]
    assert [e.content for e in fork.events if e.type == "tool_result"][-1] == "A different ending."
    # The fork is a trace like any other: it replays identically.
    assert (await replay(fork)).status == "identical"


async def test_fork_step_must_exist(recorded):
    with pytest.raises(ReplayError, match="the trace has 3 complete step"):
        await replay(read_trace(recorded), live=ScriptedModel([]), from_step=9)


class TickingClock(ManualClock):
    """Moves a minute at every reading (prompts show the minute): a reading left off the trace's tape shifts every
    later one."""

    def __call__(self):
        self.now += timedelta(minutes=1)
        return self.now


async def test_every_clock_reading_is_on_the_tape_the_pressure_monitors_too(tmp_path):
    path = tmp_path / "ticking.jsonl"
    await pressure_flush(tmp_path, TickingClock(), path)
    trace = read_trace(path)
    assert {"pressure_warning", "flush"} <= {getattr(e, "kind", None) for e in trace.events}
    report = await replay(trace)
    assert report.status == "identical", format_report(report)
