"""Replay a trace offline: the real loop, tools and compiler against the recorded model responses.

Replay rebuilds the agent from the trace header's snapshot in a scratch database (a temporary SQLite file; the
agent's real memory is never touched), serves the recorded clock readings and model responses in order, and
compares every request, tool call, tool result, memory edit, runtime event and step end with the recording.
The first difference stops the replay with a `Divergence` (exit code 1). A recorded response left unused is a
divergence too. A trace cut short by a crash replays up to its last complete step and says where it ends.

Fork (`from_step` with a live model): recorded responses up to the given step of the trace, then the live model
for the rest of that turn and for every later turn's user message; the new run is recorded as a new trace.
"""

from __future__ import annotations

import difflib
import json
import tempfile
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import structlog

from pagemind.blocks import Block, BlockEdit, CoreMemory
from pagemind.runtime.agent import Agent
from pagemind.runtime.loop import run_turn
from pagemind.runtime.model_client import ModelClient, ModelRequest, ModelResponse, response_from_body
from pagemind.runtime.trace.ids import IdMap
from pagemind.runtime.settings import Settings
from pagemind.runtime.spec import AgentSpec, BlockSpec
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.records import utcnow
from pagemind.runtime.trace.recorder import (
    EventBuilder, ModelRequestEvent, ModelResponseEvent, Parent, RuntimeEvent, StepEndEvent, ToolCallEvent,
    ToolResultEvent, Trace, TraceRecorder, TurnEvent, snapshot_message,
)
from pagemind.tools import ToolCall, ToolResult

log = structlog.get_logger("pagemind.replay")


# -- outcomes -------------------------------------------------------------------------------------------------


class Divergence(Exception):
    """The replay did something other than the recording; says which event, what was expected and what happened."""

    def __init__(self, index: int, line: int | None, where: str, what: str, detail: str):
        super().__init__(f"{where}: {what}")
        self.index, self.line, self.where, self.what, self.detail = index, line, where, what, detail


class TraceEnded(Exception):
    """A truncated trace has no more recorded events: the replay stops here, without a divergence."""


class ReplayError(ValueError):
    """A trace that cannot be replayed at all (its spec no longer loads, a bad --from-step …)."""


@dataclass
class ReplayReport:
    """What a replay found."""

    trace: Trace
    status: Literal["identical", "diverged", "truncated", "forked"]
    steps: int  # complete steps replayed identically
    divergence: Divergence | None = None
    new_trace: Path | None = None

    @property
    def exit_code(self) -> int:
        """0 identical (or a fork / a truncated trace that matched as far as it goes), 1 on a divergence."""
        return 1 if self.status == "diverged" else 0


# -- the scratch agent --------------------------------------------------------------------------------------------


class ReplayClock:
    """Serves the recorded clock readings between two events; the last one again if the runtime reads more.

    `live` switches to the real clock (a fork's live part)."""

    def __init__(self, start: datetime):
        self.last, self.tape, self.position, self.live = start, [], 0, False

    def load(self, tape: list[datetime]) -> None:
        """The readings recorded before the next event."""
        self.tape, self.position = tape, 0

    def __call__(self) -> datetime:
        if self.live:
            return utcnow()
        if self.position < len(self.tape):
            self.last = self.tape[self.position]
            self.position += 1
        return self.last


def _start_time(trace: Trace) -> datetime:
    for event in [trace.header, *trace.events]:
        if event.clock:
            return event.clock[0]
    return trace.header.created_at


def _spec(trace: Trace) -> AgentSpec:
    try:
        spec = AgentSpec.model_validate(trace.header.spec)
    except ValueError as exc:
        raise ReplayError(f"{trace.path}:1: the recorded agent spec no longer loads: {exc}") from None
    # Seed blocks with the snapshot's exact values (model_construct: no stripping, no re-validation).
    blocks = [BlockSpec.model_construct(**b.model_dump()) for b in trace.header.snapshot.blocks]
    return spec.model_copy(update={"blocks": blocks})


def scratch_settings(home: Path) -> Settings:
    """Settings that keep every store of a replay under `home`: SQLite there, the embedded vector store there
    (never QDRANT_URL); the configured embedder stays, so archival rankings come out as they did."""
    return Settings.from_env().model_copy(update={
        "home": home, "database_url": f"sqlite:///{home / 'replay.db'}", "qdrant_url": None, "qdrant_api_key": None})


async def scratch_agent(trace: Trace, model: ModelClient, clock: ReplayClock, home: Path) -> Agent:
    """The agent as the trace header found it, in fresh stores under `home` (the real ones are never opened)."""
    spec = _spec(trace)
    settings = scratch_settings(home)
    store = StateStore(make_engine(settings.database_url))
    agent = await Agent.load(spec, model=model, store=store, settings=settings, clock=clock)
    snapshot = trace.header.snapshot
    state = snapshot.agent_state
    agent.window.restore([snapshot_message(m) for m in snapshot.messages], snapshot.summary,
                         warned=bool(state.get("pressure_warned", False)),
                         correction=float(state.get("token_correction", 1.0)), recall_count=snapshot.recall_count)
    agent.memory = CoreMemory([Block(b.label, b.value, b.limit, b.description, b.read_only)
                               for b in snapshot.blocks])
    return agent


# -- comparing ------------------------------------------------------------------------------------------------


def describe(event: Any) -> str:
    """A short name for an event, for messages."""
    if isinstance(event, (ToolCallEvent, ToolResultEvent)):
        return f"{event.type} {event.name} ({event.call_id})"
    if isinstance(event, StepEndEvent):
        return f"step_end (stop_reason {event.stop_reason})"
    if isinstance(event, RuntimeEvent):
        return f"event {event.kind}"
    if isinstance(event, ModelRequestEvent) and event.purpose != "step":
        return f"model_request ({event.purpose})"
    return event.type


def render_prompt(messages: list[dict[str, Any]]) -> list[str]:
    """A request's messages as numbered text lines, for unified diffs."""
    lines: list[str] = []
    for index, message in enumerate(messages):
        extra = f" tool_call_id={message['tool_call_id']}" if message.get("tool_call_id") else ""
        lines.append(f"=== [{index}] {message.get('role')}{extra}")
        lines += (message.get("content") or "").splitlines()
        for call in message.get("tool_calls") or ():
            function = call.get("function") or {}
            lines.append(f"--> {call.get('id')} {function.get('name')}({function.get('arguments')})")
    return lines


def unified(expected: list[str], actual: list[str]) -> str:
    """A unified diff, recorded (---) against replayed (+++)."""
    return "\n".join(difflib.unified_diff(expected, actual, "recorded", "replay", lineterm="", n=3))


def _strip_timings(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _strip_timings(v) for k, v in value.items() if not str(k).endswith("_ms")}
    if isinstance(value, list):
        return [_strip_timings(v) for v in value]
    return value


def _fields(event: Any, names: tuple[str, ...]) -> dict[str, Any]:
    return {name: getattr(event, name) for name in names}


_COMPARED = {
    "turn": ("user_message",),
    "tool_call": ("call_id", "name", "arguments"),
    "tool_result": ("call_id", "name", "content", "is_error", "terminal"),
    "memory_edit": ("label", "operation", "old", "new", "at"),
    "step_end": ("stop_reason",),
}


def _field_diff(expected: dict[str, Any], actual: dict[str, Any], ids: IdMap) -> tuple[str, str] | None:
    for name in expected:
        if not ids.same(expected[name], actual.get(name)):
            detail = f"expected: {expected[name]!r}\nactual:   {actual.get(name)!r}"
            texts = (expected[name], actual.get(name))
            if all(isinstance(t, str) for t in texts) and "\n" in texts[0] + texts[1]:
                detail = unified(expected[name].splitlines(), actual[name].splitlines())
            return f"{name} differs", detail
    return None


def _request_diff(expected: dict[str, Any], actual: dict[str, Any], ids: IdMap) -> tuple[str, str] | None:
    if not ids.same(expected.get("messages"), actual.get("messages")):
        return "the prompt differs", unified(render_prompt(expected.get("messages") or []),
                                             render_prompt(actual.get("messages") or []))
    if not ids.same(expected.get("tools"), actual.get("tools")):
        dump = lambda tools: json.dumps(tools, indent=1, sort_keys=True).splitlines()  # noqa: E731
        return "the tool schemas differ", unified(dump(expected.get("tools")), dump(actual.get("tools")))
    rest = lambda body: {k: v for k, v in body.items() if k not in ("messages", "tools")}  # noqa: E731
    return _field_diff(rest(expected), rest(actual), ids)


def compare(expected: Any, actual: Any, ids: IdMap | None = None) -> tuple[str, str] | None:
    """None when the replayed event matches the recorded one (generated ids may differ, consistently: see
    `pagemind.runtime.trace.ids`), else (what differs, details)."""
    ids = ids if ids is not None else IdMap()
    if expected.type != actual.type:
        return f"expected {describe(expected)}, got {describe(actual)}", ""
    if (expected.turn, expected.step) != (actual.turn, actual.step):
        return (f"expected turn {expected.turn} step {expected.step}, got turn {actual.turn} step {actual.step}", "")
    if isinstance(expected, ModelRequestEvent):
        if expected.purpose != actual.purpose:
            return f"expected a {expected.purpose} request, got a {actual.purpose} request", ""
        return _request_diff(expected.body, json.loads(json.dumps(actual.body)), ids)
    if isinstance(expected, ModelResponseEvent):
        return None  # served from the recording
    if isinstance(expected, RuntimeEvent):
        return _field_diff({"kind": expected.kind, "data": _strip_timings(expected.data)},
                           {"kind": actual.kind, "data": _strip_timings(actual.data)}, ids)
    names = _COMPARED[expected.type]
    return _field_diff(_fields(expected, names), _fields(actual, names), ids)


class Comparator:
    """A `TurnObserver` that checks the replay's events against the recording, one by one, in order."""

    def __init__(self, trace: Trace, clock: ReplayClock, from_step: int | None = None):
        self.trace, self.clock, self.from_step = trace, clock, from_step
        self.builder = EventBuilder()
        self.position = 0
        self.steps = 0  # complete steps matched
        self.live = False
        self.seen_steps: list[tuple[int, int]] = []
        self.failure: BaseException | None = None
        self.ids = IdMap()
        self.clock.load(trace.events[0].clock if trace.events else [])

    def _where(self, event: Any) -> str:
        number = len(self.seen_steps) if self.seen_steps else 0
        if isinstance(event, TurnEvent):
            return f"turn {event.turn}"
        return f"turn {event.turn} step {event.step} (step {number} of the trace)"

    def _fail(self, error: BaseException) -> None:
        self.failure = self.failure or error
        raise error

    def check(self, actual: Any) -> None:
        """Compare the replay's next event with the recording's; advance on a match, raise otherwise."""
        if self.live:
            return
        events = self.trace.events
        if self.position >= len(events):
            if not self.trace.complete:
                self._fail(TraceEnded(self._where(actual)))
            self._fail(Divergence(self.position, None, self._where(actual), "the replay went on past the end of "
                                  f"the recording: {describe(actual)}", ""))
        expected = events[self.position]
        problem = compare(expected, actual, self.ids)
        if problem is not None:
            self._fail(Divergence(self.position, self.trace.line_of(self.position), self._where(expected),
                                  f"{describe(expected)}: {problem[0]}", problem[1]))
        self.position += 1
        self.steps += isinstance(expected, StepEndEvent)
        self.clock.load(events[self.position].clock if self.position < len(events) else [])

    def recorded_response(self) -> ModelResponseEvent:
        """The recorded answer to the request just matched."""
        events = self.trace.events
        expected = events[self.position] if self.position < len(events) else None
        if not isinstance(expected, ModelResponseEvent):
            self._fail(TraceEnded("no recorded response") if expected is None and not self.trace.complete else
                       Divergence(self.position, None, "model call", "the recording has no response here", ""))
        return expected

    def finish(self) -> None:
        """After the last turn: every recorded event must have been used."""
        if not self.live and self.position < len(self.trace.events):
            left = self.trace.events[self.position]
            self._fail(Divergence(self.position, self.trace.line_of(self.position), self._where(left),
                                  f"the replay ended but the recording goes on with {describe(left)} "
                                  f"({len(self.trace.events) - self.position} recorded event(s) left unused)", ""))

    def _maybe_go_live(self, step: int) -> None:
        key = (self.builder.turn, step)
        if not self.seen_steps or self.seen_steps[-1] != key:
            self.seen_steps.append(key)
        if self.from_step is not None and len(self.seen_steps) >= self.from_step and not self.live:
            self.live = self.clock.live = True
            log.info("fork_live", turn=key[0], step=key[1], trace_step=len(self.seen_steps))

    # TurnObserver ------------------------------------------------------------------------------------------

    def turn_started(self, agent: Any, turn_id: str, user_message: str) -> None:
        """Compare the turn's user message."""
        self.check(self.builder.turn_event(turn_id, user_message))

    def model_request(self, step: int, request: ModelRequest) -> None:
        """Compare the request (the prompt, with a unified diff on a difference)."""
        self._maybe_go_live(step)
        self.check(self.builder.request(step, request))

    def model_response(self, step: int, response: ModelResponse) -> None:
        """Advance past the served response."""
        self.check(self.builder.response(step, response))

    def tool_call(self, step: int, call: ToolCall) -> None:
        """Compare a tool call."""
        self.check(self.builder.tool_call(step, call))

    def tool_result(self, step: int, result: ToolResult) -> None:
        """Compare a tool result."""
        self.check(self.builder.tool_result(step, result))

    def memory_edit(self, step: int, edit: BlockEdit) -> None:
        """Compare a memory edit."""
        self.check(self.builder.memory_edit(step, edit))

    def event(self, step: int, kind: str, data: dict[str, Any]) -> None:
        """Compare a runtime event."""
        self.check(self.builder.runtime_event(step, kind, data))

    def step_end(self, step: int, stop_reason: str | None) -> None:
        """Compare the step's end."""
        self.check(self.builder.step_end(step, stop_reason))


class ReplayModel:
    """A `ModelClient` serving the recorded responses in order; the live model once a fork goes live."""

    def __init__(self, comparator: Comparator, live: ModelClient | None = None):
        self.comparator, self.live = comparator, live

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """The recorded response to this request (or the live model's, in a fork's live part)."""
        if self.comparator.live and self.live is not None:
            return await self.live.complete(request)
        recorded = self.comparator.recorded_response()
        return response_from_body(self.comparator.ids.translate(recorded.body), recorded.latency_ms)


# -- driving ------------------------------------------------------------------------------------------------------


def _check_from_step(trace: Trace, from_step: int | None, live: ModelClient | None) -> None:
    if (from_step is None) != (live is None):
        raise ReplayError("a fork needs both a live model and --from-step")
    if from_step is not None and not 1 <= from_step <= len(trace.steps) + 1:
        raise ReplayError(f"--from-step {from_step}: the trace has {len(trace.steps)} complete step(s); "
                          f"choose 1 to {len(trace.steps) + 1}")


async def replay(trace: Trace, *, live: ModelClient | None = None, from_step: int | None = None,
                 record_to: Path | None = None) -> ReplayReport:
    """Replay `trace` in a scratch state. With `live` and `from_step`, fork: the live model takes over at that
    step of the trace; `record_to` records the new run (its header names the parent)."""
    _check_from_step(trace, from_step, live)
    with tempfile.TemporaryDirectory(prefix="pagemind-replay-") as tmp:
        clock = ReplayClock(_start_time(trace))
        comparator = Comparator(trace, clock, from_step)
        agent = await scratch_agent(trace, ReplayModel(comparator, live), clock, Path(tmp))
        agent.observer = comparator
        recorder = None
        if record_to is not None:
            parent = Parent(trace=str(trace.path), from_step=from_step) if from_step else None
            recorder = TraceRecorder(path=record_to, parent=parent).attach(agent)
        try:
            return await _drive(trace, agent, comparator, live is not None, record_to)
        finally:
            if recorder:
                recorder.close()
            agent.store.engine.dispose()


async def _drive(trace: Trace, agent: Agent, comparator: Comparator, forking: bool,
                 record_to: Path | None) -> ReplayReport:
    try:
        for turn in trace.turns:
            await run_turn(agent, turn.user_message)
        comparator.finish()
    except (Divergence, TraceEnded):
        pass
    failure = comparator.failure  # also when something in the runtime swallowed the exception
    if isinstance(failure, Divergence):
        return ReplayReport(trace, "diverged", comparator.steps, failure, record_to)
    if forking:
        return ReplayReport(trace, "forked", comparator.steps, None, record_to)
    status = "identical" if trace.complete and failure is None else "truncated"
    return ReplayReport(trace, status, comparator.steps, None, record_to)


# -- reporting ----------------------------------------------------------------------------------------------------


def trace_end_note(trace: Trace) -> str:
    """Where a truncated trace ends."""
    if not trace.steps:
        return "the trace ends before its first complete step"
    turn, step = trace.steps[-1]
    dropped = f"; {trace.dropped} unfinished event(s) after it were left out" if trace.dropped else ""
    return f"the trace ends after turn {turn} step {step} (step {len(trace.steps)} of the trace){dropped}"


def format_report(report: ReplayReport) -> str:
    """The user-facing text for a replay's outcome."""
    trace, name = report.trace, report.trace.path.name
    if report.status == "diverged":
        d = report.divergence
        where = f" ({name}:{d.line})" if d.line else f" ({name})"
        text = f"DIVERGED at event {d.index + 1} of {len(trace.events)}{where}, {d.where}: {d.what}"
        return text + (f"\n{d.detail}" if d.detail else "")
    if report.status == "forked":
        return (f"forked: {report.steps} recorded step(s) replayed identically, then the live model; "
                f"new trace: {report.new_trace}")
    if report.status == "truncated":
        return (f"truncated trace: {trace_end_note(trace)}. Replayed {report.steps} step(s) up to there: "
                f"identical to the recording.")
    turns = len(trace.turns)
    return f"identical: {turns} turn(s), {report.steps} step(s) replayed offline match {name}"


def report_dict(report: ReplayReport) -> dict[str, Any]:
    """The outcome as JSON-friendly data."""
    d = report.divergence
    divergence = ({"event": d.index + 1, "line": d.line, "where": d.where, "what": d.what, "detail": d.detail}
                  if d else None)
    return {"status": report.status, "steps": report.steps, "exit_code": report.exit_code,
            "divergence": divergence, "new_trace": str(report.new_trace) if report.new_trace else None}
