"""Trace recording and the trace format: events, round trips, secrets, crashes, malformed files."""

import json
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pagemind.runtime.events import (
    Flush,
    FlushEvent,
    HistoryRepair,
    HistoryRepairEvent,
    MemoryEditEvent,
    ModelRequestEvent,
    ModelResponseEvent,
    PressureWarning,
    PressureWarningEvent,
    StepEndEvent,
    ToolCallEvent,
    ToolResultEvent,
    TurnEvent,
)
from pagemind.runtime.loop import run_turn
from pagemind.runtime.observer import HeardClock, NullObserver, ObserverGroup, observing
from pagemind.runtime.testing.endpoint import TEST_API_KEY
from pagemind.runtime.testing.responses import tool_call_body as tool_call
from pagemind.runtime.trace.format import LINE_ADAPTER, SCHEMA_VERSION, Header, Parent, Snapshot
from pagemind.runtime.trace.header import strip_userinfo
from pagemind.runtime.trace.reader import TraceFormatError, read_trace
from pagemind.runtime.trace.recorder import TraceRecorder, record

ROOT = Path(__file__).parents[3]

SCRIPT = [
    tool_call("core_memory_append", {"label": "human", "content": "Name: Lin. Allergic to peanuts."}),
    tool_call("core_memory_replace", {"label": "human", "old_content": "Name: Lin.", "new_content": "Name: Lin Wei."}),
    tool_call("send_message", {"message": "Nice to meet you, Lin!"}),
]


async def record_turn(make_agent, url, client, path, text="Hi, I'm Lin. I'm allergic to peanuts."):
    """One recorded multi-step turn; returns the agent and the turn's result."""
    agent = await make_agent(url, client)
    recorder = record(agent, path=path)
    result = await run_turn(agent, text)
    recorder.close()
    return agent, result


async def test_a_recorded_turn_has_every_event_in_order(scripted_openai, make_agent, sqlite_url, tmp_path):
    scripted_openai.add(*SCRIPT)
    path = tmp_path / "turn.jsonl"
    await record_turn(make_agent, sqlite_url, scripted_openai.client(), path)

    trace = read_trace(path)
    assert trace.complete and trace.dropped == 0
    assert [e.type for e in trace.events] == [
        "turn",
        "model_request",
        "model_response",
        "tool_call",
        "tool_result",
        "memory_edit",
        "step_end",
        "model_request",
        "model_response",
        "tool_call",
        "tool_result",
        "memory_edit",
        "step_end",
        "model_request",
        "model_response",
        "tool_call",
        "tool_result",
        "step_end",
    ]
    header = trace.header
    assert (header.schema_version, header.agent, header.spec["name"]) == (SCHEMA_VERSION, "tester", "tester")
    assert [b.label for b in header.snapshot.blocks] == ["persona", "human", "constraints"]
    assert header.model["name"] == "gpt-4o-mini" and header.runtime_version
    # The exact bodies sent: what the mocked endpoint received is what the trace holds.
    assert [e.body for e in trace.events if e.type == "model_request"] == scripted_openai.requests
    edits = [e for e in trace.events if isinstance(e, MemoryEditEvent)]
    assert [(e.operation, e.new) for e in edits] == [
        ("append", "Name: Lin. Allergic to peanuts."),
        ("replace", "Name: Lin Wei. Allergic to peanuts."),
    ]
    assert trace.events[-1].stop_reason == "send_message"
    # Clock readings are recorded, so a replay can serve the same times.
    assert all(r == datetime(2026, 11, 29, 15, 0, tzinfo=UTC) for e in trace.events for r in e.clock)
    assert sum(len(e.clock) for e in trace.events) > 0


async def test_the_recorder_hears_the_clock_without_swapping_it(scripted_openai, make_agent, sqlite_url, tmp_path):
    """The agent's clock hands its readings to whoever hears the agent (`HeardClock`): a recorder attached for the
    agent's life and one bound to a run alone (`observing`) note the same readings, and the clock stays the
    agent's own object (and its memory services' where they share it)."""
    stamps = []
    for bound in ("attached", "run"):
        scripted_openai.add(*SCRIPT)
        agent = await make_agent(sqlite_url, scripted_openai.client())
        clock = agent.clock
        path = tmp_path / f"{bound}.jsonl"
        if bound == "attached":
            recorder = record(agent, path=path)
            await run_turn(agent, "Hi, I'm Lin.")
        else:
            recorder = TraceRecorder(path=path)
            recorder.agent = agent
            with observing(recorder):
                await run_turn(agent, "Hi, I'm Lin.")
            assert isinstance(agent.observer, NullObserver)  # nothing was set on the agent
        recorder.close()
        assert agent.clock is clock and agent.recall.clock is clock
        assert isinstance(clock, HeardClock) and clock.now == clock.inner.now  # the clock's own attributes show
        stamps.append([len(e.clock) for e in read_trace(path).events])
    assert stamps[0] == stamps[1] and sum(stamps[0]) > 0


class FileAtStepEnd(NullObserver):
    """Observes after the recorder: reads the trace file as each step ends."""

    def __init__(self, path: Path):
        self.path, self.seen = path, []

    def on_event(self, event):
        if isinstance(event, StepEndEvent):
            self.seen.append(self.path.read_bytes())


async def test_every_step_is_on_disk_when_it_ends(scripted_openai, make_agent, sqlite_url, tmp_path):
    scripted_openai.add(*SCRIPT)
    path = tmp_path / "turn.jsonl"
    agent = await make_agent(sqlite_url, scripted_openai.client())
    recorder = record(agent, path=path)
    checker = FileAtStepEnd(path)
    agent.observer = ObserverGroup([agent.observer, checker])
    await run_turn(agent, "Hi, I'm Lin.")
    assert len(checker.seen) == 3
    for number, data in enumerate(checker.seen, start=1):
        lines = data.splitlines()
        assert data.endswith(b"\n") and json.loads(lines[-1])["type"] == "step_end"
        assert sum(b'"type":"step_end"' in line for line in lines) == number
    recorder.close()
    assert path.read_bytes() == checker.seen[-1]  # nothing was left to write at the turn's end


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
async def test_a_full_disk_stops_the_recording_not_the_agent(scripted_openai, make_agent, sqlite_url, tmp_path):
    scripted_openai.add(*SCRIPT, *SCRIPT)
    agent = await make_agent(sqlite_url, scripted_openai.client())
    recorder = record(agent, path=tmp_path / "turn.jsonl")
    first = await run_turn(agent, "Hi, I'm Lin.")
    recorder.writer._file = open("/dev/full", "wb")  # every write from now on fails with ENOSPC
    second = await run_turn(agent, "Hi again.")
    assert first.stop_reason == second.stop_reason == "send_message"
    assert recorder.failed and read_trace(tmp_path / "turn.jsonl").complete  # the first turn is intact
    recorder.close()


async def test_no_api_key_or_auth_header_in_trace_bytes(scripted_openai, make_agent, sqlite_url, tmp_path):
    scripted_openai.add(*SCRIPT)
    path = tmp_path / "turn.jsonl"
    await record_turn(make_agent, sqlite_url, scripted_openai.client(), path)
    assert scripted_openai.headers[0]["authorization"] == f"Bearer {TEST_API_KEY}"  # it was sent …
    data = path.read_bytes()
    assert TEST_API_KEY.encode() not in data  # … and never recorded
    assert b"Bearer" not in data and b"authorization" not in data.lower()


def test_credentials_in_a_base_url_are_stripped():
    assert strip_userinfo("https://user:s3cret@llm.example/v1") == "https://llm.example/v1"
    assert strip_userinfo("http://127.0.0.1:8080/v1") == "http://127.0.0.1:8080/v1"
    assert strip_userinfo("https://gw.example/v1?api-key=s3cret#x") == "https://gw.example/v1"


def _one_of_each() -> list:
    at = datetime(2026, 3, 2, 9, 14, 5, 123456, tzinfo=UTC)
    snapshot = Snapshot(
        blocks=[],
        messages=[],
        summary="s",
        recall_count=3,
        archival_count=None,
        agent_state={"pressure_warned": True, "token_correction": 1.25},
    )
    common = {"turn": 1, "step": 2, "clock": (at,)}
    return [
        Header(
            trace_id="t" * 32,
            created_at=at,
            agent="a",
            spec_hash="h",
            spec={"name": "a"},
            runtime_version="0.1.0",
            model={"name": "m", "temperature": 0.7},
            snapshot=snapshot,
            parent=Parent(trace="x.jsonl", from_step=2),
        ),
        TurnEvent(turn=1, step=0, turn_id="u", user_message='héllo 你好 \u2028 "quoted"\n'),
        ModelRequestEvent(
            **common,
            purpose="summarize",
            body={"model": "m", "messages": [{"role": "user", "content": "x"}], "temperature": 0.0, "max_tokens": 5},
        ),
        ModelResponseEvent(
            **common,
            body={"choices": [{"message": {"content": None}}], "usage": None},
            latency_ms=12.5,
            prompt_tokens=None,
            completion_tokens=7,
        ),
        ToolCallEvent(**common, call_id="c", name="send_message", arguments='{"message": "hi'),
        ToolResultEvent(**common, call_id="c", name="send_message", content="Error: …", is_error=True),
        MemoryEditEvent(**common, label="human", operation="append", old="", new="x\n", at=at),
        FlushEvent(
            **common,
            data=Flush(
                evicted=4,
                tokens_before=900,
                tokens_after=400,
                summary_tokens=50,
                summary_chunks=2,
                summary_truncated=True,
                extraction="stored",
                extracted=3,
                enough=False,
            ),
        ),
        PressureWarningEvent(**common, data=PressureWarning(tokens=700, usable=1000, percent=70)),
        HistoryRepairEvent(
            **common, data=HistoryRepair(problems=["a call without its result: c1"], added=1, dropped=0)
        ),
        StepEndEvent(**common, stop_reason=None),
    ]


@pytest.mark.parametrize("event", _one_of_each(), ids=lambda e: getattr(e, "kind", e.type))
def test_every_event_type_round_trips_without_loss(event):
    line = LINE_ADAPTER.dump_json(event)
    again = LINE_ADAPTER.validate_json(line)
    assert again == event and type(again) is type(event)
    assert LINE_ADAPTER.dump_json(again) == line


async def test_recorded_lines_round_trip_byte_for_byte(scripted_openai, make_agent, sqlite_url, tmp_path):
    scripted_openai.add(*SCRIPT)
    path = tmp_path / "turn.jsonl"
    await record_turn(make_agent, sqlite_url, scripted_openai.client(), path)
    for line in path.read_bytes().splitlines():
        assert LINE_ADAPTER.dump_json(LINE_ADAPTER.validate_json(line)) == line


async def test_requests_share_unchanged_messages_and_tools_with_the_previous_one(
    scripted_openai, make_agent, sqlite_url, tmp_path
):
    scripted_openai.add(*SCRIPT)
    path = tmp_path / "turn.jsonl"
    await record_turn(make_agent, sqlite_url, scripted_openai.client(), path)
    on_disk = [json.loads(line) for line in path.read_text().splitlines() if '"model_request"' in line]
    assert not on_disk[0]["compact"] and on_disk[0]["body"]["messages"][1]["role"] == "user"
    assert on_disk[2]["compact"] and on_disk[2]["body"]["tools"] == {"$prev": True}
    assert {"$prev": [1, 4]} in on_disk[2]["body"]["messages"]  # user, assistant, tool of the step before
    written = sum(len(line) for line in path.read_text().splitlines() if '"model_request"' in line)
    # the tool schemas are written once and each message once: a quarter or more saved on even a short turn
    assert written < 0.75 * sum(len(json.dumps(r, separators=(",", ":"))) for r in scripted_openai.requests)

    lines = path.read_text().splitlines()
    third = next(i for i, line in enumerate(lines) if '"compact":true' in line and '"step":3' in line)
    event = json.loads(lines[third])
    event["body"]["messages"][1] = {"$prev": [0, 99]}
    bad = _write_lines(tmp_path / "bad.jsonl", lines[:third] + [json.dumps(event)] + lines[third + 1 :])
    with pytest.raises(TraceFormatError, match=rf"bad\.jsonl:{third + 1}: invalid compact request: reference"):
        read_trace(bad)


def _write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("\n".join(lines) + "\n")
    return path


async def test_a_malformed_line_names_the_line(scripted_openai, make_agent, sqlite_url, tmp_path):
    scripted_openai.add(*SCRIPT)
    path = tmp_path / "turn.jsonl"
    await record_turn(make_agent, sqlite_url, scripted_openai.client(), path)
    lines = path.read_text().splitlines()

    broken = _write_lines(tmp_path / "broken.jsonl", lines[:4] + ['{"type": "tool_call", "turn": 1'] + lines[5:])
    with pytest.raises(TraceFormatError, match=r"broken\.jsonl:5: not valid JSON"):
        read_trace(broken)

    event = json.loads(lines[5])
    event["type"] = "teleport"
    unknown = _write_lines(tmp_path / "unknown.jsonl", lines[:5] + [json.dumps(event)] + lines[6:])
    with pytest.raises(TraceFormatError, match=r"unknown\.jsonl:6: invalid event"):
        read_trace(unknown)

    event = json.loads(lines[2])
    del event["body"]
    missing = _write_lines(tmp_path / "missing.jsonl", lines[:2] + [json.dumps(event)] + lines[3:])
    with pytest.raises(TraceFormatError, match=r"missing\.jsonl:3: invalid event: .*body"):
        read_trace(missing)


async def test_an_unknown_schema_version_is_refused_on_line_1(scripted_openai, make_agent, sqlite_url, tmp_path):
    scripted_openai.add(*SCRIPT)
    path = tmp_path / "turn.jsonl"
    await record_turn(make_agent, sqlite_url, scripted_openai.client(), path)
    lines = path.read_text().splitlines()
    header = json.loads(lines[0])
    header["schema_version"] = 99
    future = _write_lines(tmp_path / "future.jsonl", [json.dumps(header)] + lines[1:])
    with pytest.raises(TraceFormatError, match=r"future\.jsonl:1: unknown schema_version 99.*reads schema_version 1"):
        read_trace(future)
    headless = _write_lines(tmp_path / "headless.jsonl", lines[1:])
    with pytest.raises(TraceFormatError, match=r"headless\.jsonl:1: the first line must be the trace header"):
        read_trace(headless)


CRASHING_RUN = """
import asyncio, os, signal, sys
from pathlib import Path
from pagemind.runtime.agent import Agent
from pagemind.runtime.testing.clock import ManualClock
from pagemind.runtime.testing.models import FunctionModel
from pagemind.runtime.testing.responses import tool_call_body
from pagemind.runtime.testing.specs import build_spec
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.trace.recorder import record

async def dies_on_step_two(request):
    await asyncio.sleep(0)  # where a real call waits on the network (the recorder writes the request then)
    if len(model.requests) == 2:
        os.kill(os.getpid(), signal.SIGKILL)  # the process dies mid-step, no cleanup
    return tool_call_body("core_memory_append", {"label": "human", "content": "Lin"})

model = FunctionModel(dies_on_step_two)

async def main():
    home = Path(sys.argv[1])
    agent = await Agent.load(build_spec(), model=model,
                             store=StateStore(make_engine(f"sqlite:///{home / 'db.sqlite'}")), clock=ManualClock())
    recorder = record(agent, path=home / "crash.jsonl")
    recorder.write_request_after = 0  # every call "lasts": its request is written while the model works
    await agent.send("hello")

asyncio.run(main())
"""


def test_a_process_killed_mid_step_leaves_a_readable_trace(tmp_path):
    result = subprocess.run(
        [sys.executable, "-c", CRASHING_RUN, str(tmp_path)], cwd=ROOT, capture_output=True, timeout=120
    )
    assert result.returncode == -9, result.stderr.decode()[-2000:]
    trace = read_trace(tmp_path / "crash.jsonl")
    assert not trace.complete
    assert trace.steps == [(1, 1)]  # step 1 was flushed whole; step 2's request is there but left out
    assert trace.dropped == 1 and trace.events[-1].type == "step_end"
