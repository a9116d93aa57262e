"""Tool-call traces: the event model, a JSON Lines writer, the recorder that observes a running agent, a reader.

A trace is one JSON object per line. The first line is the header (schema version, agent, spec, runtime
version, model settings, and a snapshot of core memory and the in-context messages at the start); then one line
per event as the loop reports it: turn, model request (the exact body sent), model response (the raw body),
tool call, tool result, memory edit, runtime event (pressure warnings, flushes …), step end. Every event carries
the agent-clock readings taken since the previous event, so a replay can serve the same clock values.

Events are noted as they happen and written and flushed at every step's end, a model request also while a
slow model call is in flight: a crash leaves a readable trace up to the last complete step, and the request that
was in flight. Secrets never enter a trace: no headers are recorded, and URLs lose their userinfo.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import json
import uuid
from datetime import datetime
from importlib import metadata
from pathlib import Path
from typing import IO, Annotated, Any, Callable, Iterable, Literal, NamedTuple, Union
from urllib.parse import urlsplit, urlunsplit

import structlog
from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError
from pydantic_core import to_json

from pagemind.blocks import BlockEdit
from pagemind.runtime.messages import Message
from pagemind.runtime.model_client import ModelRequest, ModelResponse
from pagemind.runtime.observer import NullObserver, ObserverGroup
from pagemind.runtime.state.records import utcnow
from pagemind.runtime.trace.compaction import compact_body, expand_body
from pagemind.tools import ToolCall, ToolResult

log = structlog.get_logger("pagemind.trace")

SCHEMA_VERSION = 1
TRACE_SUFFIX = ".jsonl"


# -- the event model ------------------------------------------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ToolCallData(_Strict):
    """A tool call inside a stored message."""

    id: str
    name: str
    arguments: str


class MessageSnapshot(_Strict):
    """One in-context message as it stood when the trace started."""

    role: str
    content: str | None
    created_at: datetime
    tool_calls: list[ToolCallData] = []
    tool_call_id: str | None = None
    name: str | None = None
    is_error: bool = False
    turn_id: str | None = None


class BlockSnapshot(_Strict):
    """One core-memory block as it stood when the trace started."""

    label: str
    value: str
    limit: int
    description: str = ""
    read_only: bool = False


class Snapshot(_Strict):
    """The agent's state at the start of the trace: enough to rebuild it in a scratch database."""

    blocks: list[BlockSnapshot]
    messages: list[MessageSnapshot]
    summary: str = ""
    recall_count: int = 0
    archival_count: int | None = None
    agent_state: dict[str, Any] = {}


class Parent(_Strict):
    """Where a forked trace came from."""

    trace: str
    from_step: int


class _Event(_Strict):
    clock: list[datetime] = []  # the agent clock's readings since the previous event, in order


class Header(_Event):
    """The first line of every trace."""

    type: Literal["header"] = "header"
    schema_version: int = SCHEMA_VERSION
    trace_id: str
    created_at: datetime
    agent: str
    spec_hash: str
    spec: dict[str, Any]
    runtime_version: str
    model: dict[str, Any]
    snapshot: Snapshot
    parent: Parent | None = None
    redacted: bool = False  # user and memory text replaced by placeholders (`pagemind trace export --redact`)


class _StepEvent(_Event):
    turn: int  # 1-based turn number within the trace
    step: int  # the loop's step number within the turn (0 before the first step)


class TurnEvent(_StepEvent):
    """A user message starts a turn."""

    type: Literal["turn"] = "turn"
    turn_id: str
    user_message: str


class ModelRequestEvent(_StepEvent):
    """The exact body sent to the model (messages, tools, parameters); never headers or keys.

    On disk a request may be `compact`: what it shares with the previous request of the same purpose in the file
    is written as references (`runtime/trace_compact.py`), so a long window is not written out again at every
    step. `read_trace` expands them: readers always see the full body.
    """

    type: Literal["model_request"] = "model_request"
    purpose: str = "step"  # step | summarize | extract (not sent to the model)
    body: dict[str, Any]
    compact: bool = False


class ModelResponseEvent(_StepEvent):
    """The raw response body as received, with latency and usage."""

    type: Literal["model_response"] = "model_response"
    body: dict[str, Any]
    latency_ms: float = 0.0
    prompt_tokens: int | None = None
    completion_tokens: int | None = None


class ToolCallEvent(_StepEvent):
    """A tool call as the model emitted it (raw JSON arguments)."""

    type: Literal["tool_call"] = "tool_call"
    call_id: str
    name: str
    arguments: str


class ToolResultEvent(_StepEvent):
    """What went back to the model for one call."""

    type: Literal["tool_result"] = "tool_result"
    call_id: str
    name: str
    content: str
    is_error: bool
    terminal: bool = False


class MemoryEditEvent(_StepEvent):
    """A committed core-memory edit."""

    type: Literal["memory_edit"] = "memory_edit"
    label: str
    operation: str
    old: str
    new: str
    at: datetime


class RuntimeEvent(_StepEvent):
    """Something the runtime did on its own: a pressure warning, a flush with its summary, a history repair."""

    type: Literal["event"] = "event"
    kind: str
    data: dict[str, Any] = {}


class StepEndEvent(_StepEvent):
    """The step was committed; a stop reason means the turn ended."""

    type: Literal["step_end"] = "step_end"
    stop_reason: str | None


TraceEvent = Annotated[
    Union[Header, TurnEvent, ModelRequestEvent, ModelResponseEvent, ToolCallEvent, ToolResultEvent,
          MemoryEditEvent, RuntimeEvent, StepEndEvent],
    Field(discriminator="type"),
]
EVENT_ADAPTER: TypeAdapter[Any] = TypeAdapter(TraceEvent)
"""Validates (and dumps) any trace line."""


def dump_event(event: "BaseModel | EventData") -> bytes:
    """One trace line (without the newline), from an event model or its data in field order: the same bytes as
    `EVENT_ADAPTER.dump_json` and faster (no union dispatch)."""
    return to_json(event)


# -- snapshots and secrets ----------------------------------------------------------------------------------


@functools.cache
def runtime_version() -> str:
    """The installed pagemind version."""
    try:
        return metadata.version("pagemind")
    except metadata.PackageNotFoundError:
        return "0+unknown"


def strip_userinfo(url: str | None) -> str | None:
    """A URL without `user:password@`, query or fragment, so credentials in a base URL (some gateways take
    the key as `?api-key=…`) never reach a trace."""
    if not url:
        return url
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[-1], query="", fragment=""))


def _public_spec(agent: Any) -> dict[str, Any]:
    spec = agent.spec.model_dump(mode="json")
    spec["model"]["base_url"] = strip_userinfo(spec["model"].get("base_url"))
    return spec


def message_snapshot(message: Message) -> MessageSnapshot:
    """A stored message in trace form."""
    return MessageSnapshot(
        role=message.role, content=message.content, created_at=message.created_at,
        tool_calls=[ToolCallData(id=c.id, name=c.name, arguments=c.arguments) for c in message.tool_calls],
        tool_call_id=message.tool_call_id, name=message.name, is_error=message.is_error, turn_id=message.turn_id,
    )


def snapshot_message(snapshot: MessageSnapshot) -> Message:
    """A trace message back in runtime form (not yet stored)."""
    calls = tuple(ToolCall(c.id, c.name, c.arguments) for c in snapshot.tool_calls)
    return Message(snapshot.role, snapshot.content, snapshot.created_at, tool_calls=calls,
                   tool_call_id=snapshot.tool_call_id, name=snapshot.name, is_error=snapshot.is_error,
                   turn_id=snapshot.turn_id)


def take_snapshot(agent: Any) -> Snapshot:
    """The agent's core memory, window and small per-agent state, as they stand."""
    archival_count = agent.archival.stats()[0] if getattr(agent, "archival", None) else None
    window = agent.window
    state = {"pressure_warned": window.warned, "token_correction": window.correction}
    return Snapshot(
        blocks=[BlockSnapshot(label=b.label, value=b.value, limit=b.limit, description=b.description,
                              read_only=b.read_only) for b in agent.memory.blocks],
        messages=[message_snapshot(m) for m in window.messages],
        summary=window.summary, recall_count=window.recall_count, archival_count=archival_count,
        agent_state=json.loads(json.dumps(state, default=str)),
    )


def make_header(agent: Any, parent: Parent | None = None, trace_id: str | None = None) -> Header:
    """The header for a trace that starts now, from the agent as it stands."""
    model = _public_spec(agent)["model"]
    return Header(
        trace_id=trace_id or uuid.uuid4().hex, created_at=utcnow(), agent=agent.name,
        spec_hash=agent.spec.spec_hash(), spec=_public_spec(agent), runtime_version=runtime_version(),
        model=model, snapshot=take_snapshot(agent), parent=parent,
    )


# -- building events from what the loop reports ---------------------------------------------------------------


class Stamp(NamedTuple):
    """Where an event sits: the agent-clock readings taken since the previous event, the turn and the step."""

    clock: list[datetime]
    turn: int
    step: int


# The recorder writes events as plain dicts in the models' field order: validating a model per event would
# double what recording costs. Tests check that every line read back dumps to the same bytes.
EventData = dict[str, Any]


def _data(stamp: Stamp, event_type: str, /, **fields: Any) -> EventData:
    return {"clock": stamp.clock, "turn": stamp.turn, "step": stamp.step, "type": event_type, **fields}


def turn_data(stamp: Stamp, turn_id: str, user_message: str) -> EventData:
    """A new turn begins."""
    return _data(stamp, "turn", turn_id=turn_id, user_message=user_message)


def request_data(stamp: Stamp, request: ModelRequest, previous: tuple[list[Any], list[Any]] | None = None) -> EventData:
    """A model request as sent; given the previous request's (messages, tools), in compact form."""
    body, compact = request.body(), False
    if previous is not None:
        body, compact = compact_body(body, *previous)
    return _data(stamp, "model_request", purpose=request.purpose, body=body, compact=compact)


def response_data(stamp: Stamp, response: ModelResponse) -> EventData:
    """A model response as received."""
    return _data(stamp, "model_response", body=response.raw, latency_ms=round(response.latency_ms, 3),
                 prompt_tokens=response.prompt_tokens, completion_tokens=response.completion_tokens)


def tool_call_data(stamp: Stamp, call: ToolCall) -> EventData:
    """A tool call."""
    return _data(stamp, "tool_call", call_id=call.id, name=call.name, arguments=call.arguments)


def tool_result_data(stamp: Stamp, result: ToolResult) -> EventData:
    """A tool result."""
    return _data(stamp, "tool_result", call_id=result.call_id, name=result.name, content=result.content,
                 is_error=result.is_error, terminal=result.terminal)


def memory_edit_data(stamp: Stamp, edit: BlockEdit) -> EventData:
    """A committed block edit."""
    return _data(stamp, "memory_edit", label=edit.label, operation=edit.operation, old=edit.old_value,
                 new=edit.new_value, at=edit.at)


def runtime_event_data(stamp: Stamp, kind: str, data: dict[str, Any]) -> EventData:
    """A pressure-monitor (or other runtime) event."""
    return _data(stamp, "event", kind=kind, data=json.loads(json.dumps(data, default=str)))


def step_end_data(stamp: Stamp, stop_reason: str | None) -> EventData:
    """The end of a committed step."""
    return _data(stamp, "step_end", stop_reason=stop_reason)


def _event(data: EventData) -> Any:
    return EVENT_ADAPTER.validate_python(data)


class EventBuilder:
    """Turns observer callbacks into trace events, numbering turns and collecting clock readings."""

    def __init__(self) -> None:
        self.turn = 0
        self.readings: list[datetime] = []

    def _clock(self) -> list[datetime]:
        readings, self.readings = self.readings, []
        return readings

    def stamp(self, step: int) -> Stamp:
        """Stamp the next event of this turn (taking the clock readings noted since the previous one)."""
        return Stamp(self._clock(), self.turn, step)

    def new_turn(self) -> Stamp:
        """Stamp the event that starts the next turn."""
        self.turn += 1
        return self.stamp(0)

    def turn_event(self, turn_id: str, user_message: str) -> TurnEvent:
        """A new turn begins."""
        return _event(turn_data(self.new_turn(), turn_id, user_message))

    def request(self, step: int, request: ModelRequest,
                previous: tuple[list[Any], list[Any]] | None = None) -> ModelRequestEvent:
        """A model request as sent; given the previous request's (messages, tools), in compact form."""
        return _event(request_data(self.stamp(step), request, previous))

    def response(self, step: int, response: ModelResponse) -> ModelResponseEvent:
        """A model response as received."""
        return _event(response_data(self.stamp(step), response))

    def tool_call(self, step: int, call: ToolCall) -> ToolCallEvent:
        """A tool call."""
        return _event(tool_call_data(self.stamp(step), call))

    def tool_result(self, step: int, result: ToolResult) -> ToolResultEvent:
        """A tool result."""
        return _event(tool_result_data(self.stamp(step), result))

    def memory_edit(self, step: int, edit: BlockEdit) -> MemoryEditEvent:
        """A committed block edit."""
        return _event(memory_edit_data(self.stamp(step), edit))

    def runtime_event(self, step: int, kind: str, data: dict[str, Any]) -> RuntimeEvent:
        """A pressure-monitor (or other runtime) event."""
        return _event(runtime_event_data(self.stamp(step), kind, data))

    def step_end(self, step: int, stop_reason: str | None) -> StepEndEvent:
        """The end of a committed step."""
        return _event(step_end_data(self.stamp(step), stop_reason))


class TapeClock:
    """Wraps an agent's clock and notes every reading, so a trace can hand the same times to a replay."""

    def __init__(self, inner: Callable[[], datetime], builder: EventBuilder):
        self.inner = inner
        self.builder = builder

    def __call__(self) -> datetime:
        value = self.inner()
        self.builder.readings.append(value)
        return value


# -- writing ----------------------------------------------------------------------------------------------------


class TraceWriter:
    """Appends events to one JSON Lines file; `flush()` makes them durable against a crash of the process."""

    def __init__(self, path: Path):
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file: IO[bytes] = open(path, "xb")  # never overwrite a trace

    def write(self, event: BaseModel | EventData) -> None:
        """Append one event (buffered)."""
        self._file.write(dump_event(event) + b"\n")

    def write_many(self, events: Iterable[BaseModel | EventData]) -> None:
        """Append events (buffered), in order."""
        self._file.write(b"".join(dump_event(event) + b"\n" for event in events))

    def flush(self) -> None:
        """Hand buffered events to the operating system."""
        self._file.flush()

    @property
    def closed(self) -> bool:
        """Whether the file was closed (nothing more can be written)."""
        return self._file.closed

    def close(self) -> None:
        """Flush and close."""
        if not self._file.closed:
            self._file.close()


def trace_filename(agent_name: str, at: datetime, trace_id: str) -> str:
    """`<UTC time>-<short id>.jsonl`: sorts by time, unique per trace."""
    return f"{at:%Y%m%dT%H%M%S}-{trace_id[:8]}{TRACE_SUFFIX}"


def traces_dir(home: Path, agent_name: str) -> Path:
    """Where an agent's traces live under PAGEMIND_HOME."""
    return home / "traces" / agent_name


PendingEvent = tuple[Callable[..., EventData], Stamp, tuple[Any, ...]]


class TraceRecorder:
    """A `TurnObserver` that writes a trace: to one file (`path`), or one file per turn under `directory`.

    The header is written when the first turn starts, with a snapshot of the agent as it stands then. Events are
    noted as they happen (a stamp and the reported objects, which the loop never mutates) and built, written
    and flushed together at the end of each step: one warm pass instead of six cold ones, over plain dicts
    rather than models, keeps recording cheap. A model call that lasts longer than `write_request_after` has its
    request written while the agent waits, so a call that hangs or kills the process leaves its request in the file.
    """

    write_request_after = 0.02
    """Seconds a model call may take before its request is written without waiting for the step's end."""

    def __init__(self, *, path: Path | None = None, directory: Path | None = None, parent: Parent | None = None):
        if (path is None) == (directory is None):
            raise ValueError("give exactly one of path (one trace) or directory (one trace per turn)")
        self.path, self.directory, self.parent = path, directory, parent
        self.builder = EventBuilder()
        self.writer: TraceWriter | None = None
        self.previous: dict[str, tuple[list[Any], list[Any]]] = {}
        self.pending: list[PendingEvent] = []
        self.paths: list[Path] = []
        self.failed = False
        self._scheduled_write: asyncio.Handle | None = None

    def attach(self, agent: Any) -> "TraceRecorder":
        """Observe `agent` (alongside any observer it has) and note its clock readings — the agent's own, and
        those of its memory services that share its clock."""
        original = agent.clock
        agent.clock = TapeClock(original, self.builder)
        for part in (getattr(agent, "archival", None), getattr(agent, "recall", None)):
            if part is not None and getattr(part, "clock", None) is original:
                part.clock = agent.clock
        agent.observer = self if isinstance(agent.observer, NullObserver) else ObserverGroup([agent.observer, self])
        return self

    def _open(self, agent: Any) -> None:
        self.close()
        self.previous = {}  # references never cross files
        header = make_header(agent, self.parent)
        header.clock = self.builder._clock()
        path = self.path or self.directory / trace_filename(agent.name, header.created_at, header.trace_id)
        self.writer = TraceWriter(path)
        self.paths.append(path)
        self.builder.turn = 0
        self._write([header])

    def _write(self, events: Iterable[BaseModel | EventData]) -> None:
        if self.writer is None or self.writer.closed or self.failed:
            return
        try:
            self.writer.write_many(events)
            self.writer.flush()
        except OSError as exc:  # a full disk must not take the agent down with it
            self._stop(self.writer.path, exc)

    def _stop(self, path: Path, error: OSError) -> None:
        self.failed = True
        log.error("trace_write_failed", path=str(path), error=str(error))

    def _note(self, build: Callable[..., EventData], stamp: Stamp, *args: Any) -> None:
        self.pending.append((build, stamp, args))

    def write_pending(self) -> None:
        """Build, write and flush the events noted so far."""
        if self._scheduled_write is not None:
            self._scheduled_write.cancel()
            self._scheduled_write = None
        pending, self.pending = self.pending, []
        if pending:
            self._write(build(stamp, *args) for build, stamp, args in pending)

    def _write_if_the_call_lasts(self) -> None:
        # A quick call (a scripted model, a cached answer) leaves the request to the step's single write; one
        # that lasts has it written while the agent waits: a hang or a crash then shows what was asked.
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.write_pending()
            return
        if self._scheduled_write is None:
            self._scheduled_write = (loop.call_later(self.write_request_after, self.write_pending)
                                     if self.write_request_after > 0 else loop.call_soon(self.write_pending))

    def turn_started(self, agent: Any, turn_id: str, user_message: str) -> None:
        """Start a trace file if needed, then note the turn."""
        if self.writer is None or self.directory is not None:
            self._open(agent)
        self._note(turn_data, self.builder.new_turn(), turn_id, user_message)

    def model_request(self, step: int, request: ModelRequest) -> None:
        """Note the request; written at the step's end, or while the model call is in flight if it lasts."""
        previous = self.previous.get(request.purpose)
        self.previous[request.purpose] = (request.messages, request.tools)
        self._note(request_data, self.builder.stamp(step), request, previous)
        self._write_if_the_call_lasts()

    def model_response(self, step: int, response: ModelResponse) -> None:
        """Note the raw response."""
        self._note(response_data, self.builder.stamp(step), response)

    def tool_call(self, step: int, call: ToolCall) -> None:
        """Note a tool call."""
        self._note(tool_call_data, self.builder.stamp(step), call)

    def tool_result(self, step: int, result: ToolResult) -> None:
        """Note a tool result."""
        self._note(tool_result_data, self.builder.stamp(step), result)

    def memory_edit(self, step: int, edit: BlockEdit) -> None:
        """Note a committed edit."""
        self._note(memory_edit_data, self.builder.stamp(step), edit)

    def event(self, step: int, kind: str, data: dict[str, Any]) -> None:
        """Note a runtime event."""
        self._note(runtime_event_data, self.builder.stamp(step), kind, data)

    def step_end(self, step: int, stop_reason: str | None) -> None:
        """Note the step's end; write and flush the step."""
        self._note(step_end_data, self.builder.stamp(step), stop_reason)
        self.write_pending()

    def close(self) -> None:
        """Write what is pending and close the current file."""
        if self.writer is None:
            return
        self.write_pending()
        try:
            self.writer.close()
        except OSError as exc:  # what was buffered when the disk filled up
            if not self.failed:
                self._stop(self.writer.path, exc)


def record(agent: Any, *, path: Path | None = None, directory: Path | None = None,
           parent: Parent | None = None) -> TraceRecorder:
    """Record `agent`'s turns: into the file `path`, or one file per turn under `directory`."""
    return TraceRecorder(path=path, directory=directory, parent=parent).attach(agent)


# -- reading ----------------------------------------------------------------------------------------------------


class TraceFormatError(ValueError):
    """A trace that cannot be read; the message names the file and line."""


@dataclasses.dataclass
class Trace:
    """A trace as read: its header, its events (with their line numbers) and where it ends."""

    path: Path
    header: Header
    events: list[Any]
    lines: list[int]
    complete: bool
    dropped: int = 0  # events after the last complete step (a torn or unfinished step), left out of `events`

    @property
    def turns(self) -> list[TurnEvent]:
        """The turns, in order."""
        return [e for e in self.events if isinstance(e, TurnEvent)]

    @property
    def steps(self) -> list[tuple[int, int]]:
        """(turn, step) of every complete step, in order; the index + 1 is the step's number in the trace."""
        return [(e.turn, e.step) for e in self.events if isinstance(e, StepEndEvent)]

    def line_of(self, index: int) -> int:
        """The file line of `events[index]`."""
        return self.lines[index]


def _problem(error: ValidationError) -> str:
    first = error.errors()[0]
    where = ".".join(str(p) for p in first["loc"]) or "(line)"
    more = f" (and {error.error_count() - 1} more)" if error.error_count() > 1 else ""
    return f"{where}: {first['msg']}{more}"


def _parse_header(path: Path, raw: bytes) -> Header:
    try:
        data = json.loads(raw)
    except json.JSONDecodeError as exc:
        raise TraceFormatError(f"{path}:1: not valid JSON ({exc.msg} at column {exc.colno})") from None
    if not isinstance(data, dict) or data.get("type") != "header":
        raise TraceFormatError(f"{path}:1: the first line must be the trace header (type \"header\")")
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise TraceFormatError(
            f"{path}:1: unknown schema_version {version!r}; this pagemind ({runtime_version()}) reads "
            f"schema_version {SCHEMA_VERSION}")
    try:
        return Header.model_validate(data)
    except ValidationError as exc:
        raise TraceFormatError(f"{path}:1: invalid header: {_problem(exc)}") from None


def _parse_line(path: Path, number: int, raw: bytes) -> Any:
    try:
        return EVENT_ADAPTER.validate_json(raw)
    except ValidationError as exc:
        kind = "not valid JSON" if exc.errors()[0]["type"] == "json_invalid" else "invalid event"
        raise TraceFormatError(f"{path}:{number}: {kind}: {_problem(exc)}") from None


def _expand(path: Path, events: list[Any], lines: list[int]) -> None:
    """Replace compact requests by their full bodies, in place."""
    previous: dict[str, dict[str, Any]] = {}
    for event, number in zip(events, lines):
        if not isinstance(event, ModelRequestEvent):
            continue
        if event.compact:
            try:
                event.body, event.compact = expand_body(event.body, previous.get(event.purpose)), False
            except (ValueError, TypeError) as exc:
                raise TraceFormatError(f"{path}:{number}: invalid compact request: {exc}") from None
        previous[event.purpose] = event.body


def _complete_prefix(events: list[Any]) -> int:
    """How many events make up whole steps (up to and including the last step end)."""
    for index in range(len(events) - 1, -1, -1):
        if isinstance(events[index], StepEndEvent):
            return index + 1
    return 0


def read_trace(path: str | Path) -> Trace:
    """Read and validate a trace. A torn last line or an unfinished step (a crash) is dropped, not an error;
    anything else malformed raises TraceFormatError naming the line."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TraceFormatError(f"{path}: cannot read: {exc.strerror or exc}") from None
    raw_lines = data.split(b"\n")
    torn = raw_lines.pop() if raw_lines else b""  # text after the last newline: a line cut off mid-write
    if not raw_lines:
        if torn.strip():
            raise TraceFormatError(f"{path}:1: the header line is incomplete (the trace was cut off)")
        raise TraceFormatError(f"{path}: empty file, not a trace")
    header = _parse_header(path, raw_lines[0])
    events, lines = [], []
    for number, raw in enumerate(raw_lines[1:], start=2):
        if raw.strip():
            events.append(_parse_line(path, number, raw))
            lines.append(number)
    torn_dropped = False
    if torn.strip():
        try:
            events.append(EVENT_ADAPTER.validate_json(torn))
            lines.append(len(raw_lines) + 1)
        except ValidationError:
            torn_dropped = True  # cut off mid-write: everything before it still counts
    _expand(path, events, lines)
    return _finish(path, header, events, lines, torn_dropped)


def _finish(path: Path, header: Header, events: list[Any], lines: list[int], torn_dropped: bool) -> Trace:
    last = events[-1] if events else None
    complete = isinstance(last, StepEndEvent) and last.stop_reason is not None and not torn_dropped
    keep = len(events) if complete else _complete_prefix(events)
    return Trace(path, header, events[:keep], lines[:keep], complete, dropped=len(events) - keep + int(torn_dropped))
