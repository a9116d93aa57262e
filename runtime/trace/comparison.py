"""Following a recording during a replay: compare each event the replay reports with the recorded one, serve
the recorded clock readings and external-memory reads, and say precisely where and how the two part (a unified
diff for prompts).

Events are compared in order. Recorded memory reads (`memory_read` lines) are not: the runtime may make them from
worker threads and a flush's work in the background, so each read the replay makes is served the first unused
recorded read of the same kind with the same request, wherever it sits in the turn; a read the recording does not
hold is a divergence at that read."""

from __future__ import annotations

import dataclasses
import difflib
import json
from datetime import datetime
from typing import Any, NoReturn, assert_never

import structlog

from pagemind.runtime.events import (
    Event,
    FlushAheadEvent,
    FlushEvent,
    HistoryRepairEvent,
    MemoryEditEvent,
    MemoryReadEvent,
    ModelRequestEvent,
    ModelResponseEvent,
    PressureSqueezedEvent,
    PressureWarningEvent,
    ReplyDeltaEvent,
    ReplyResetEvent,
    RuntimeEventBase,
    SalienceEvent,
    StepEndEvent,
    ToolCallEvent,
    ToolResultEvent,
    TurnEvent,
)
from pagemind.runtime.state.records import utcnow
from pagemind.runtime.trace.ids import IdMap
from pagemind.runtime.trace.reader import Trace

log = structlog.get_logger("pagemind.replay")


class Divergence(Exception):
    """The replay did something other than the recording; says which event, what was expected and what happened."""

    def __init__(self, index: int, line: int | None, where: str, what: str, detail: str):
        super().__init__(f"{where}: {what}")
        self.index, self.line, self.where, self.what, self.detail = index, line, where, what, detail


class TraceEnded(Exception):
    """A truncated trace has no more recorded events: the replay stops here, without a divergence."""


class ReplayClock:
    """Serves the recorded clock readings between two events; the last one again if the runtime reads more.

    `live` switches to the real clock (a fork's live part)."""

    def __init__(self, start: datetime):
        self.last, self.position, self.live = start, 0, False
        self.tape: tuple[datetime, ...] = ()

    def load(self, tape: tuple[datetime, ...]) -> None:
        """The readings recorded before the next event."""
        self.tape, self.position = tape, 0

    def __call__(self) -> datetime:
        if self.live:
            return utcnow()
        if self.position < len(self.tape):
            self.last = self.tape[self.position]
            self.position += 1
        return self.last


def describe(event: Event) -> str:
    """A short name for an event, for messages."""
    if isinstance(event, (ToolCallEvent, ToolResultEvent)):
        return f"{event.type} {event.name} ({event.call_id})"
    if isinstance(event, StepEndEvent):
        return f"step_end (stop_reason {event.stop_reason})"
    if isinstance(event, RuntimeEventBase):
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
        return "the prompt differs", unified(
            render_prompt(expected.get("messages") or []), render_prompt(actual.get("messages") or [])
        )
    if not ids.same(expected.get("tools"), actual.get("tools")):

        def dump(tools: Any) -> list[str]:
            return json.dumps(tools, indent=1, sort_keys=True).splitlines()

        return "the tool schemas differ", unified(dump(expected.get("tools")), dump(actual.get("tools")))

    def rest(body: dict[str, Any]) -> dict[str, Any]:
        return {k: v for k, v in body.items() if k not in ("messages", "tools")}

    return _field_diff(rest(expected), rest(actual), ids)


def _compared(event: Event) -> dict[str, Any] | None:
    """What a replay must reproduce of an event, by field; None for a response (the replay is served it).
    Clock readings are never compared: the replay is served the recorded ones."""
    match event:
        case TurnEvent():
            return {"user_message": event.user_message}
        case ModelRequestEvent():
            return {"purpose": event.purpose, "body": event.body}
        case ModelResponseEvent():
            return None
        case ToolCallEvent():
            return {"call_id": event.call_id, "name": event.name, "arguments": event.arguments}
        case ToolResultEvent():
            return {
                "call_id": event.call_id,
                "name": event.name,
                "content": event.content,
                "is_error": event.is_error,
                "terminal": event.terminal,
            }
        case MemoryEditEvent():
            return {
                "label": event.label,
                "operation": event.operation,
                "old": event.old,
                "new": event.new,
                "at": event.at,
            }
        case (
            HistoryRepairEvent()
            | PressureWarningEvent()
            | FlushEvent()
            | FlushAheadEvent()
            | PressureSqueezedEvent()
            | SalienceEvent()
        ):
            # timings (`…_ms`) are the machine's, not the agent's behaviour
            return {k: v for k, v in dataclasses.asdict(event.data).items() if not k.endswith("_ms")}
        case StepEndEvent():
            return {"stop_reason": event.stop_reason}
        case ReplyDeltaEvent() | ReplyResetEvent():
            return None  # never recorded (`Comparator.on_event` skips them); the response they make up is served
        case MemoryReadEvent():
            return None  # served by request, not compared in order (`Comparator.served_read`)
        case _:
            assert_never(event)


def compare(expected: Event, actual: Event, ids: IdMap | None = None) -> tuple[str, str] | None:
    """None when the replayed event matches the recorded one (generated ids may differ, consistently: see
    `pagemind.runtime.trace.ids`), else (what differs, details)."""
    ids = ids if ids is not None else IdMap()
    if type(expected) is not type(actual):
        return f"expected {describe(expected)}, got {describe(actual)}", ""
    if (expected.turn, expected.step) != (actual.turn, actual.step):
        return (f"expected turn {expected.turn} step {expected.step}, got turn {actual.turn} step {actual.step}", "")
    recorded, replayed = _compared(expected), _compared(actual)
    if recorded is None or replayed is None:
        return None
    if isinstance(expected, ModelRequestEvent):
        if recorded["purpose"] != replayed["purpose"]:
            return f"expected a {recorded['purpose']} request, got a {replayed['purpose']} request", ""
        return _request_diff(recorded["body"], json.loads(json.dumps(replayed["body"])), ids)
    return _field_diff(recorded, replayed, ids)


class Comparator:
    """An observer that checks the replay's events against the recording, one by one, in order; it also serves
    the recorded clock readings and responses, and goes live where a fork leaves the recording."""

    def __init__(self, trace: Trace, clock: ReplayClock, from_step: int | None = None):
        self.trace, self.clock, self.from_step = trace, clock, from_step
        self.turn = 0
        self.position = 0
        self.steps = 0  # complete steps matched
        self.live = False
        self.seen_steps: list[tuple[int, int]] = []
        self.failure: BaseException | None = None
        self.ids = IdMap()
        self.events: list[Event] = []  # what is compared in order, with its index among the trace's events
        self.indices: list[int] = []
        self.reads: list[tuple[int, MemoryReadEvent]] = []  # recorded reads not yet served, by trace index
        for index, event in enumerate(trace.events):
            if isinstance(event, MemoryReadEvent):
                self.reads.append((index, event))
            else:
                self.events.append(event)
                self.indices.append(index)
        self.clock.load(self.events[0].clock if self.events else ())

    def _where(self, event: Event) -> str:
        number = len(self.seen_steps) if self.seen_steps else 0
        if isinstance(event, TurnEvent):
            return f"turn {event.turn}"
        return f"turn {event.turn} step {event.step} (step {number} of the trace)"

    def _fail(self, error: BaseException) -> NoReturn:
        self.failure = self.failure or error
        raise error

    def _diverged(self, position: int, where: str, what: str, detail: str) -> NoReturn:
        """A divergence at the `position`-th compared event (at the end of the recording when past its end)."""
        if position >= len(self.events):
            self._fail(Divergence(len(self.trace.events), None, where, what, detail))
        index = self.indices[position]
        self._fail(Divergence(index, self.trace.line_of(index), where, what, detail))

    def check(self, actual: Event) -> None:
        """Compare the replay's next event with the recording's; advance on a match, raise otherwise."""
        if self.live:
            return
        events = self.events
        if self.position >= len(events):
            if not self.trace.complete:
                self._fail(TraceEnded(self._where(actual)))
            self._diverged(
                self.position,
                self._where(actual),
                f"the replay went on past the end of the recording: {describe(actual)}",
                "",
            )
        expected = events[self.position]
        problem = compare(expected, actual, self.ids)
        if problem is not None:
            self._diverged(self.position, self._where(expected), f"{describe(expected)}: {problem[0]}", problem[1])
        self.position += 1
        self.steps += isinstance(expected, StepEndEvent)
        self.clock.load(events[self.position].clock if self.position < len(events) else ())

    def recorded_response(self) -> ModelResponseEvent:
        """The recorded answer to the request just matched."""
        events = self.events
        expected = events[self.position] if self.position < len(events) else None
        if not isinstance(expected, ModelResponseEvent):
            if expected is None and not self.trace.complete:
                self._fail(TraceEnded("no recorded response"))
            self._diverged(self.position, "model call", "the recording has no response here", "")
        return expected

    def served_read(self, source: str, read: str, request: dict[str, Any]) -> Any:
        """The recorded result of this external-memory read (recorded ids given their replayed names): the first
        unused recorded read of the same kind with an equal request. None recorded is a divergence."""
        asked = json.loads(json.dumps(request))  # the form a trace line gives it back in
        same_kind = [(n, e) for n, (_, e) in enumerate(self.reads) if (e.source, e.read) == (source, read)]
        for n, recorded in same_kind:
            if self.ids.same(recorded.request, asked):
                del self.reads[n]
                return self.ids.translate(recorded.result)
        where = f"turn {self.turn}" + (f" step {self.seen_steps[-1][1]}" if self.seen_steps else "")
        if not same_kind:
            what = f"the replay read {source} memory ({read}) where the recording read nothing more of that kind"
            self._diverged(self.position, where, what, json.dumps(asked, ensure_ascii=False)[:2000])

        def dump(value: Any) -> list[str]:
            return json.dumps(value, indent=1, sort_keys=True, ensure_ascii=False).splitlines()

        index, expected = self.reads[same_kind[0][0]]
        what = f"the replay read {source} memory ({read}) with a request the recording does not hold"
        detail = unified(dump(expected.request), dump(asked))
        self._fail(Divergence(index, self.trace.line_of(index), where, what, detail))

    def finish(self) -> None:
        """After the last turn: every recorded event must have been used."""
        if not self.live and self.position < len(self.events):
            left = self.events[self.position]
            self._diverged(
                self.position,
                self._where(left),
                f"the replay ended but the recording goes on with {describe(left)} "
                f"({len(self.events) - self.position} recorded event(s) left unused)",
                "",
            )

    def _maybe_go_live(self, step: int) -> None:
        key = (self.turn, step)
        if not self.seen_steps or self.seen_steps[-1] != key:
            self.seen_steps.append(key)
        if self.from_step is not None and len(self.seen_steps) >= self.from_step and not self.live:
            self.live = self.clock.live = True
            log.info("fork_live", turn=key[0], step=key[1], trace_step=len(self.seen_steps))

    def on_event(self, event: Event) -> None:
        """Number the turns as the recorder did, go live where a fork says, and compare (see `compare`)."""
        if isinstance(event, (ReplyDeltaEvent, ReplyResetEvent, MemoryReadEvent)):
            return  # deltas are not recorded; reads are served (`served_read`), not compared
        if isinstance(event, TurnEvent):
            self.turn += 1
        elif isinstance(event, ModelRequestEvent):
            self._maybe_go_live(event.step)
        self.check(dataclasses.replace(event, turn=self.turn))
