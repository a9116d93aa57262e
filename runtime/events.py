"""What happens in a turn, as one union of event types: the runtime emits them, observers consume them, and a
trace is these same events written one per line.

The loop and the pressure monitor hand each event to `observer.on_event(event)` as it happens. The consumers —
the trace recorder, the replay comparator, the demo display, the timeline — each take the union apart with one
`match` that ends in `assert_never`, so a new kind of event is: its class here, added to `Event` (or to
`RuntimeEvent`, for something the runtime did on its own), and one `case` in each consumer (a type checker, and
tests/runtime/test_events.py at run time, point at a consumer that forgot it).

An event's fields are exactly its trace line's, in the same order. `turn` (1-based within the trace) and `clock`
(the agent-clock readings taken since the previous event) say where the event sits in a trace: the runtime leaves
them empty, the recorder fills them in as it writes, and the trace reader gives them back.

Events are frozen dataclasses, not pydantic models: the runtime builds several per step, recording or not, and
a dataclass costs a fraction of a validated model (bench/trace_overhead.py). Pydantic validates them where data
comes from outside — reading a trace (`pagemind.runtime.trace.format.LINE_ADAPTER`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import ConfigDict, Field

if TYPE_CHECKING:  # annotations only: the model client imports openai, which readers of traces never need
    from pagemind.blocks import BlockEdit
    from pagemind.runtime.model.client import ModelRequest, ModelResponse
    from pagemind.tools import ToolCall, ToolResult

_STRICT = ConfigDict(extra="forbid")  # read by pydantic when it validates a trace line into these classes


@dataclass(frozen=True, kw_only=True)
class _Event:
    __pydantic_config__ = _STRICT

    clock: tuple[datetime, ...] = ()  # the agent clock's readings since the previous event, in order
    turn: int = 0  # 1-based turn number within the trace (0 until the recorder places the event)
    step: int  # the loop's step number within the turn (0 before the first step)


@dataclass(frozen=True, kw_only=True)
class TurnEvent(_Event):
    """A user message starts a turn."""

    type: Literal["turn"] = "turn"
    turn_id: str
    user_message: str


@dataclass(frozen=True, kw_only=True)
class ModelRequestEvent(_Event):
    """The exact body sent to the model (messages, tools, parameters); never headers or keys.

    In a trace file a request may be `compact`: what it shares with the previous request of the same purpose is
    written as references (`pagemind.runtime.trace.compaction`). The reader expands them, so every consumer sees
    the full body and `compact` False.
    """

    type: Literal["model_request"] = "model_request"
    purpose: str = "step"  # step | summarize | extract (not sent to the model)
    body: dict[str, Any]
    compact: bool = False

    @classmethod
    def from_request(cls, step: int, request: ModelRequest) -> ModelRequestEvent:
        """The event for a request about to be sent."""
        return cls(step=step, purpose=request.purpose, body=request.body())


@dataclass(frozen=True, kw_only=True)
class ModelResponseEvent(_Event):
    """The raw response body as received, with latency and usage."""

    type: Literal["model_response"] = "model_response"
    body: dict[str, Any]
    latency_ms: float = 0.0
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None

    @classmethod
    def from_response(cls, step: int, response: ModelResponse) -> ModelResponseEvent:
        """The event for a response that arrived."""
        return cls(
            step=step,
            body=response.raw,
            latency_ms=round(response.latency_ms, 3),
            prompt_tokens=response.prompt_tokens,
            completion_tokens=response.completion_tokens,
            cached_tokens=response.cached_tokens,
        )


@dataclass(frozen=True, kw_only=True)
class ToolCallEvent(_Event):
    """A tool call as the model emitted it (raw JSON arguments)."""

    type: Literal["tool_call"] = "tool_call"
    call_id: str
    name: str
    arguments: str

    @classmethod
    def from_call(cls, step: int, call: ToolCall) -> ToolCallEvent:
        """The event for a tool about to be called."""
        return cls(step=step, call_id=call.id, name=call.name, arguments=call.arguments)


@dataclass(frozen=True, kw_only=True)
class ToolResultEvent(_Event):
    """What went back to the model for one call."""

    type: Literal["tool_result"] = "tool_result"
    call_id: str
    name: str
    content: str
    is_error: bool
    terminal: bool = False

    @classmethod
    def from_result(cls, step: int, result: ToolResult) -> ToolResultEvent:
        """The event for a tool's answer."""
        return cls(
            step=step,
            call_id=result.call_id,
            name=result.name,
            content=result.content,
            is_error=result.is_error,
            terminal=result.terminal,
        )


@dataclass(frozen=True, kw_only=True)
class MemoryEditEvent(_Event):
    """A committed core-memory edit."""

    type: Literal["memory_edit"] = "memory_edit"
    label: str
    operation: str
    old: str
    new: str
    at: datetime

    @classmethod
    def from_edit(cls, step: int, edit: BlockEdit) -> MemoryEditEvent:
        """The event for a committed edit."""
        return cls(
            step=step, label=edit.label, operation=edit.operation, old=edit.old_value, new=edit.new_value, at=edit.at
        )


@dataclass(frozen=True, kw_only=True)
class StepEndEvent(_Event):
    """The step was committed; a stop reason means the turn ended."""

    type: Literal["step_end"] = "step_end"
    stop_reason: str | None


@dataclass(frozen=True, kw_only=True)
class ReplyDeltaEvent(_Event):
    """A piece of the reply as the model writes it, when someone watches the turn live and the model streams
    (`runtime.reply_stream`): `source` is `content` or the reply tool's name. Not written to traces: the response
    it becomes is, whole, so a replay (which does not stream) sees the same turn."""

    type: Literal["reply_delta"] = "reply_delta"
    text: str
    source: str = "content"


@dataclass(frozen=True, kw_only=True)
class ReplyResetEvent(_Event):
    """The text of the `ReplyDeltaEvent`s so far is not the reply (a failed attempt that will be retried, a note
    before a tool call, a step that did not end the turn): drop it. Not written to traces."""

    type: Literal["reply_reset"] = "reply_reset"
    reason: str


@dataclass(frozen=True, kw_only=True)
class MemoryReadEvent(_Event):
    """What the turn read from external memory (archival or recall), as the runtime used it: `source` the memory,
    `read` which read (`pagemind.runtime.memory.reads`), `request` what was asked, `result` what came back (JSON).

    Recorded only for observers that ask for reads (the trace recorder): a replay rebuilds the agent without its
    archival and recall stores and is served these reads in their place, while its writes go to a scratch store.
    Never shown on streams; clock readings stay with the events around it."""

    type: Literal["memory_read"] = "memory_read"
    source: str
    read: str
    request: dict[str, Any]
    result: Any


# -- what the runtime did on its own (one line type, "event", told apart by `kind`; the details under `data`) ----


@dataclass(frozen=True, kw_only=True)
class RuntimeEventBase(_Event):
    """Something the runtime did on its own, between the model's moves: `kind` says what, `data` the details."""

    type: Literal["event"] = "event"
    kind: str


@dataclass(frozen=True, kw_only=True)
class HistoryRepair:
    """What a history repair changed in the window."""

    __pydantic_config__ = _STRICT

    problems: list[str]
    added: int
    dropped: int


@dataclass(frozen=True, kw_only=True)
class HistoryRepairEvent(RuntimeEventBase):
    """The in-context history broke the API's rules (a call without its result …) and was repaired."""

    kind: Literal["history_repair"] = "history_repair"
    data: HistoryRepair


@dataclass(frozen=True, kw_only=True)
class PressureWarning:
    """The window's fill when the model was warned."""

    __pydantic_config__ = _STRICT

    tokens: int
    usable: int
    percent: int


@dataclass(frozen=True, kw_only=True)
class PressureWarningEvent(RuntimeEventBase):
    """The window crossed the warning line: the model was told, once this cycle, to save what matters."""

    kind: Literal["pressure_warning"] = "pressure_warning"
    data: PressureWarning


@dataclass(frozen=True, kw_only=True)
class Flush:
    """What a flush evicted, what it left, and what the summary and extraction made of it."""

    __pydantic_config__ = _STRICT

    evicted: int
    tokens_before: int
    tokens_after: int
    summary_tokens: int
    summary_chunks: int
    summary_truncated: bool = False  # not in traces recorded before flushes reported it
    extraction: str
    extracted: int
    enough: bool
    ahead: bool = False  # the summary and extraction were prepared before the flush line (not in older traces)
    waited_ms: float = 0.0  # how long the flush waited for the model (0 when the work was ready)


@dataclass(frozen=True, kw_only=True)
class FlushEvent(RuntimeEventBase):
    """The window crossed the flush line (or the provider refused the prompt): the oldest messages left it."""

    kind: Literal["flush"] = "flush"
    data: Flush


@dataclass(frozen=True, kw_only=True)
class FlushAhead:
    """Work for the next flush prepared in the background (`started`), or thrown away (`discarded`) because the
    window changed under it or its eviction no longer brings the window below the warning line (`reason`)."""

    __pydantic_config__ = _STRICT

    action: Literal["started", "discarded"]
    evicting: int  # messages the prepared eviction takes out
    tokens: int  # what they weigh, as the compiler counts them
    reason: str = ""


@dataclass(frozen=True, kw_only=True)
class FlushAheadEvent(RuntimeEventBase):
    """The window crossed the warning line and the summary of its oldest messages started in the background, so
    the flush need not wait for the model; or such work was discarded."""

    kind: Literal["flush_ahead"] = "flush_ahead"
    data: FlushAhead


@dataclass(frozen=True, kw_only=True)
class Squeezed:
    """The sizes behind a squeezed window: what no eviction removes (`floor`), the room a flush at the flush line
    would buy against what several turns need, and the pinned parts by name (all in tokens)."""

    __pydantic_config__ = _STRICT

    tokens: int
    usable: int
    flush_at: int
    hard_at: int
    floor: int
    room: int
    needed: int
    pinned: dict[str, int]


@dataclass(frozen=True, kw_only=True)
class PressureSqueezedEvent(RuntimeEventBase):
    """Said once per loaded agent: flushing cannot buy room for several turns (the pinned part fills the window),
    so the window now flushes at the hard line, growing into the output reserve first."""

    kind: Literal["pressure_squeezed"] = "pressure_squeezed"
    data: Squeezed


@dataclass(frozen=True, kw_only=True)
class Salience:
    """A salience gate's decision (`runtime/memory/lifecycle/salience.py`): whether a turn, or the turns leaving the
    window, are worth remembering and worth a memory lookup, with the score, the reason and who decided."""

    __pydantic_config__ = _STRICT

    gate: str  # prefetch | extraction
    remember: bool
    lookup: bool
    score: float
    reason: str
    source: str  # rules | model (the model was asked; its answer, or "worth it" when it failed)
    turns: int = 1  # turns assessed (extraction: the turns leaving the window)


@dataclass(frozen=True, kw_only=True)
class SalienceEvent(RuntimeEventBase):
    """The salience gate decided whether a turn's archival lookup, or a flush's extraction call, is worth it."""

    kind: Literal["salience"] = "salience"
    data: Salience


RuntimeEvent = Annotated[
    HistoryRepairEvent | PressureWarningEvent | FlushEvent | FlushAheadEvent | PressureSqueezedEvent | SalienceEvent,
    Field(discriminator="kind"),
]
"""Something the runtime did on its own, between the model's moves."""

Event = Annotated[
    TurnEvent
    | ModelRequestEvent
    | ModelResponseEvent
    | ToolCallEvent
    | ToolResultEvent
    | MemoryEditEvent
    | RuntimeEvent
    | StepEndEvent
    | ReplyDeltaEvent
    | ReplyResetEvent
    | MemoryReadEvent,
    Field(discriminator="type"),
]
"""Every event of a turn, in the order they happen: what observers receive and what a trace holds."""


def without_body(event: Event) -> Event:
    """The event as streams keep and relay it: a model request or response without its body (the whole prompt,
    kilobytes a step: the trace's business, never shown), any other event as it is."""
    if isinstance(event, (ModelRequestEvent, ModelResponseEvent)) and event.body:
        return dataclasses.replace(event, body={})
    return event
