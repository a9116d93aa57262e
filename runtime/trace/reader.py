"""Reading a trace file: validate every line into the trace types, expand compact requests, and find where a
trace cut short by a crash stops making sense."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from pagemind.runtime.crypto.cipher import PREFIX, TextCipher
from pagemind.runtime.crypto.keys import EncryptionKeyError
from pagemind.runtime.events import Event, ModelRequestEvent, ModelResponseEvent, StepEndEvent, TurnEvent
from pagemind.runtime.trace.compaction import expand_body
from pagemind.runtime.trace.format import LINE_ADAPTER, SCHEMA_VERSION, Header
from pagemind.runtime.trace.header import runtime_version


class TraceFormatError(ValueError):
    """A trace that cannot be read; the message names the file and line."""


@dataclass
class Trace:
    """A trace as read: its header, its events (with their line numbers) and where it ends."""

    path: Path
    header: Header
    events: list[Event]
    lines: list[int]
    complete: bool
    dropped: int = 0  # events after the last complete step (a torn or unfinished step), left out of `events`
    cipher: TextCipher | None = None  # what its sealed lines were opened with (a replay's recording seals with it)

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
    except UnicodeDecodeError:
        raise TraceFormatError(f"{path}:1: not a trace (binary data, not UTF-8 JSON lines)") from None
    except json.JSONDecodeError as exc:
        raise TraceFormatError(f"{path}:1: not valid JSON ({exc.msg} at column {exc.colno})") from None
    except RecursionError:
        raise TraceFormatError(f"{path}:1: JSON nested too deeply to be a trace header") from None
    if not isinstance(data, dict) or data.get("type") != "header":
        raise TraceFormatError(f'{path}:1: the first line must be the trace header (type "header")')
    version = data.get("schema_version")
    if version != SCHEMA_VERSION:
        raise TraceFormatError(
            f"{path}:1: unknown schema_version {version!r}; this pagemind ({runtime_version()}) reads "
            f"schema_version {SCHEMA_VERSION}"
        )
    try:
        return Header.model_validate(data)
    except ValidationError as exc:
        raise TraceFormatError(f"{path}:1: invalid header: {_problem(exc)}") from None


def _parse_line(path: Path, number: int, raw: bytes) -> Any:
    try:
        event = LINE_ADAPTER.validate_json(raw)
    except ValidationError as exc:
        kind = "not valid JSON" if exc.errors()[0]["type"] == "json_invalid" else "invalid event"
        raise TraceFormatError(f"{path}:{number}: {kind}: {_problem(exc)}") from None
    if isinstance(event, Header):
        raise TraceFormatError(f"{path}:{number}: a second header (one trace has one; two traces joined together?)")
    if isinstance(event, ModelResponseEvent):
        problem = response_shape_problem(event.body)
        if problem:
            raise TraceFormatError(f"{path}:{number}: invalid model_response body: {problem}")
    return event


def response_shape_problem(body: dict[str, Any]) -> str | None:
    """What makes a recorded response body unusable for replay and display (None when its shape is fine): the
    parts the runtime reads must have the types the OpenAI API gives them."""
    choices = body.get("choices", [])
    if not isinstance(choices, list) or not all(isinstance(c, dict) for c in choices):
        return "`choices` must be a list of objects"
    for index, choice in enumerate(choices):
        message = choice.get("message", {})
        if not isinstance(message, dict):
            return f"choices[{index}].message must be an object"
        calls = message.get("tool_calls") or []
        if not isinstance(calls, list) or not all(
            isinstance(c, dict) and isinstance(c.get("function", {}), dict) for c in calls
        ):
            return f"choices[{index}].message.tool_calls must be a list of objects with a `function` object"
    usage = body.get("usage")
    if usage is not None and not isinstance(usage, dict):
        return "`usage` must be an object"
    return None


def _expand(path: Path, events: list[Any], lines: list[int]) -> None:
    """Replace compact requests by their full bodies, in place."""
    previous: dict[str, dict[str, Any]] = {}
    for index, (event, number) in enumerate(zip(events, lines, strict=True)):
        if not isinstance(event, ModelRequestEvent):
            continue
        if not isinstance(event.body.get("messages"), list):
            raise TraceFormatError(
                f"{path}:{number}: invalid {'compact ' if event.compact else ''}request: "
                "its body has no `messages` list"
            )
        if event.compact:
            try:
                body = expand_body(event.body, previous.get(event.purpose))
            except (ValueError, TypeError, KeyError) as exc:
                raise TraceFormatError(f"{path}:{number}: invalid compact request: {exc}") from None
            event = events[index] = dataclasses.replace(event, body=body, compact=False)
        previous[event.purpose] = event.body


def _complete_prefix(events: list[Any]) -> int:
    """How many events make up whole steps (up to and including the last step end)."""
    for index in range(len(events) - 1, -1, -1):
        if isinstance(events[index], StepEndEvent):
            return index + 1
    return 0


def _opened(path: Path, number: int, raw: bytes, cipher: TextCipher | None) -> bytes:
    """A line as written: a sealed line (encryption at rest: `runtime.crypto`) opened, a plain one as it is."""
    if not raw.startswith(PREFIX.encode()):
        return raw
    if cipher is None:
        raise TraceFormatError(
            f"{path}:{number}: the trace is encrypted: set PAGEMIND_ENCRYPTION_KEY (or PAGEMIND_ENCRYPTION_KEY_FILE) "
            "to the key it was written with"
        )
    try:
        return cipher.open_bytes(raw.strip())
    except EncryptionKeyError as exc:
        raise TraceFormatError(f"{path}:{number}: {exc}") from None


def read_trace(path: str | Path, cipher: TextCipher | None = None) -> Trace:
    """Read and validate a trace (its sealed lines opened with `cipher`). A torn last line or an unfinished step
    (a crash) is dropped, not an error; anything else malformed raises TraceFormatError naming the line."""
    path = Path(path)
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise TraceFormatError(f"{path}: cannot read: {exc.strerror or exc}") from None
    raw_lines = data.split(b"\n")
    torn = raw_lines.pop() if raw_lines else b""  # text after the last newline: a line cut off mid-write
    raw_lines = [_opened(path, n, raw, cipher) for n, raw in enumerate(raw_lines, start=1)]
    if torn.startswith(PREFIX.encode()):
        try:
            torn = _opened(path, len(raw_lines) + 1, torn, cipher)
        except TraceFormatError:
            torn = b"{"  # a sealed line cut off mid-write: dropped as a torn line is
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
            events.append(LINE_ADAPTER.validate_json(torn))
            lines.append(len(raw_lines) + 1)
        except ValidationError:
            torn_dropped = True  # cut off mid-write: everything before it still counts
    _expand(path, events, lines)
    trace = _finish(path, header, events, lines, torn_dropped)
    trace.cipher = cipher
    return trace


def _finish(path: Path, header: Header, events: list[Any], lines: list[int], torn_dropped: bool) -> Trace:
    last = events[-1] if events else None
    complete = isinstance(last, StepEndEvent) and last.stop_reason is not None and not torn_dropped
    keep = len(events) if complete else _complete_prefix(events)
    return Trace(path, header, events[:keep], lines[:keep], complete, dropped=len(events) - keep + int(torn_dropped))
