"""Recording a running agent into a trace file (`pagemind.runtime.trace.format`).

The recorder observes the agent's events, stamps each with its turn within the trace and the clock readings
taken since the previous one (the agent's clock hands them to it: `note_clock`, `runtime.observer.HeardClock`;
nothing of the agent is swapped), and writes them as JSON lines. Events are noted as they happen and written and
flushed at every step's end, a model request also while a slow model call is in flight: a crash leaves a
readable trace up to the last complete step, and the request that was in flight.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from datetime import datetime
from pathlib import Path
from typing import IO, Any, NamedTuple, assert_never

import structlog

from pagemind.runtime.crypto.cipher import TextCipher
from pagemind.runtime.crypto.columns import cipher_of
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
    SalienceEvent,
    StepEndEvent,
    ToolCallEvent,
    ToolResultEvent,
    TurnEvent,
)
from pagemind.runtime.observer import joined
from pagemind.runtime.trace.compaction import compact_body
from pagemind.runtime.trace.format import TRACE_SUFFIX, Header, Parent, dump_line
from pagemind.runtime.trace.header import make_header

log = structlog.get_logger("pagemind.trace")

LineData = dict[str, Any]
"""An event's trace line as plain data, fields in order (what the recorder writes)."""


class Pending(NamedTuple):
    """An event noted but not yet written, with its place in the trace."""

    event: Event
    clock: tuple[datetime, ...]
    turn: int
    previous: tuple[list[Any], list[Any]] | None = None  # a request's predecessor's (messages, tools)

    def line(self) -> LineData:
        """The trace line: the event's fields, stamped, a request's body in compact form.

        Plain data rather than a copy of the event: one `dict` per line keeps recording cheap (tests check that
        every line read back dumps to the same bytes)."""
        line = {**vars(self.event), "clock": self.clock, "turn": self.turn}
        if self.previous is not None:
            line["body"], line["compact"] = compact_body(line["body"], *self.previous)
        return line


class TraceWriter:
    """Appends lines to one JSON Lines file; `flush()` makes them durable against a crash of the process."""

    def __init__(self, path: Path, cipher: TextCipher | None = None):
        self.path = path
        self.cipher = cipher  # each line sealed with it (encryption at rest: `runtime.crypto`); None: plain JSON
        path.parent.mkdir(parents=True, exist_ok=True)
        self._file: IO[bytes] = open(path, "xb")  # never overwrite a trace

    def _dumped(self, line: Header | Event | LineData) -> bytes:
        data = dump_line(line)
        return self.cipher.seal_bytes(data) if self.cipher is not None else data

    def write(self, line: Header | Event | LineData) -> None:
        """Append one line (buffered)."""
        self._file.write(self._dumped(line) + b"\n")

    def write_many(self, lines: Iterable[Header | Event | LineData]) -> None:
        """Append lines (buffered), in order."""
        self._file.write(b"".join(self._dumped(line) + b"\n" for line in lines))

    def flush(self) -> None:
        """Hand buffered lines to the operating system."""
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


class TraceRecorder:
    """An observer that writes a trace: to one file (`path`), or one file per turn under `directory`.

    The header is written when the first turn starts, with a snapshot of the agent as it stands then. Events are
    noted as they happen (with their stamp; events are frozen) and written and flushed together at the end of each
    step: one warm pass instead of six cold ones, over plain dicts rather than models, keeps recording cheap. A
    model call that lasts longer than `write_request_after` has its request written while the agent waits, so a
    call that hangs or kills the process leaves its request in the file.
    """

    write_request_after = 0.02
    """Seconds a model call may take before its request is written without waiting for the step's end."""

    wants_reads = True
    """A trace holds what each turn read from external memory, so a replay can be served the same reads."""

    def __init__(
        self,
        *,
        path: Path | None = None,
        directory: Path | None = None,
        parent: Parent | None = None,
        cipher: TextCipher | None = None,
    ):
        if (path is None) == (directory is None):
            raise ValueError("give exactly one of path (one trace) or directory (one trace per turn)")
        self.path, self.directory, self.parent = path, directory, parent
        self.cipher = cipher  # None: the agent's store's (sealed when its database is encrypted)
        self.agent: Any = None
        self.turn = 0
        self.readings: list[datetime] = []
        self.writer: TraceWriter | None = None
        self.previous: dict[str, tuple[list[Any], list[Any]]] = {}
        self.pending: list[Pending] = []
        self.paths: list[Path] = []
        self.failed = False
        self.in_turn = False  # between a turn's start and its last step's end: the turn's reads are recorded
        self._scheduled_write: asyncio.Handle | None = None

    def attach(self, agent: Any) -> TraceRecorder:
        """Observe `agent` (alongside any observer it has), its events and its clock readings (the agent's own,
        and those of its memory services that share its clock), from now on."""
        self.agent = agent
        agent.observer = joined(agent.observer, self)
        return self

    def note_clock(self, value: datetime) -> None:
        """A reading of the agent's clock, for the next event's stamp (`runtime.observer.HeardClock`)."""
        self.readings.append(value)

    def _clock(self) -> tuple[datetime, ...]:
        readings = tuple(self.readings)
        self.readings.clear()
        return readings

    def _open(self) -> None:
        self.close()
        self.previous = {}  # references never cross files
        header = make_header(self.agent, self.parent)
        header.clock = list(self._clock())
        path = self.path
        if path is None:
            assert self.directory is not None  # the constructor demands one of them
            path = self.directory / trace_filename(self.agent.name, header.created_at, header.trace_id)
        store = getattr(self.agent, "store", None)
        cipher = self.cipher or (cipher_of(store.engine) if store is not None else None)
        self.writer = TraceWriter(path, cipher)
        self.paths.append(path)
        self.turn = 0
        self._write([header])

    def _write(self, lines: Iterable[Header | LineData]) -> None:
        if self.writer is None or self.writer.closed or self.failed:
            return
        try:
            self.writer.write_many(lines)
            self.writer.flush()
        except OSError as exc:  # a full disk must not take the agent down with it
            self._stop(self.writer.path, exc)

    def _stop(self, path: Path, error: OSError) -> None:
        self.failed = True
        log.error("trace_write_failed", path=str(path), error=str(error))

    def _note(self, event: Event, previous: tuple[list[Any], list[Any]] | None = None) -> None:
        self.pending.append(Pending(event, self._clock(), self.turn, previous))

    def write_pending(self) -> None:
        """Write and flush the events noted so far."""
        if self._scheduled_write is not None:
            self._scheduled_write.cancel()
            self._scheduled_write = None
        pending, self.pending = self.pending, []
        if pending:
            self._write(p.line() for p in pending)

    def _write_if_the_call_lasts(self) -> None:
        # A quick call (a scripted model, a cached answer) leaves the request to the step's single write; one
        # that lasts has it written while the agent waits: a hang or a crash then shows what was asked.
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            self.write_pending()
            return
        if self._scheduled_write is None:
            self._scheduled_write = (
                loop.call_later(self.write_request_after, self.write_pending)
                if self.write_request_after > 0
                else loop.call_soon(self.write_pending)
            )

    def on_event(self, event: Event) -> None:
        """Note the event; a turn may start a new file, a step's end writes the step."""
        match event:
            case TurnEvent():
                self.in_turn = False  # the header's snapshot reads the statistics: no part of the turn
                if self.writer is None or self.directory is not None:
                    self._open()
                self.turn += 1
                self.in_turn = True
                self._note(event)
            case ModelRequestEvent():
                previous = self.previous.get(event.purpose)
                self.previous[event.purpose] = (event.body["messages"], event.body.get("tools") or [])
                self._note(event, previous)
                self._write_if_the_call_lasts()
            case StepEndEvent():
                self._note(event)
                self.in_turn = event.stop_reason is None
                self.write_pending()
            case MemoryReadEvent():
                if self.in_turn:  # (a read between turns, e.g. inspecting the prompt, belongs to no trace)
                    # No clock readings of its own: those stay with the events the replay compares in order.
                    self.pending.append(Pending(event, (), self.turn))
            case (
                ModelResponseEvent()
                | ToolCallEvent()
                | ToolResultEvent()
                | MemoryEditEvent()
                | HistoryRepairEvent()
                | PressureWarningEvent()
                | FlushEvent()
                | FlushAheadEvent()
                | PressureSqueezedEvent()
                | SalienceEvent()
            ):
                self._note(event)
            case ReplyDeltaEvent() | ReplyResetEvent():
                pass  # not recorded: the streamed reply is recorded whole, as its response (replays do not stream)
            case _:
                assert_never(event)

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


def record(
    agent: Any, *, path: Path | None = None, directory: Path | None = None, parent: Parent | None = None
) -> TraceRecorder:
    """Record `agent`'s turns: into the file `path`, or one file per turn under `directory`."""
    return TraceRecorder(path=path, directory=directory, parent=parent).attach(agent)
