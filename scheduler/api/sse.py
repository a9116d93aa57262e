"""A run as server-sent events: the runtime's events (`runtime/events.py`) under stable SSE event names.

| SSE event     | from                                   | data                                              |
| ------------- | -------------------------------------- | ------------------------------------------------- |
| `accepted`    | the inbox                              | the run (`RunOut`): its id before anything runs   |
| `turn_start`  | `TurnEvent`                            | `turn_id`                                         |
| `step_start`  | `ModelRequestEvent` (purpose `step`)   | `step`                                            |
| `model_done`  | `ModelResponseEvent` of a step         | `step`, `latency_ms`, token counts                |
| `tool_call`   | `ToolCallEvent`                        | `step`, `call_id`, `name`, `arguments` (raw JSON) |
| `tool_result` | `ToolResultEvent`                      | `step`, `call_id`, `name`, `content`, `is_error`  |
| `memory_edit` | `MemoryEditEvent`                      | `step`, `label`, `operation`, `old`, `new`        |
| `step_end`    | `StepEndEvent`                         | `step`, `stop_reason`                             |
| `runtime`     | a runtime event (flush, warning …)     | `step`, `kind`, `data`                            |
| `reply_delta` | `ReplyDeltaEvent`                      | `step`, `text` (the next piece), `source`         |
| `reply_reset` | `ReplyResetEvent`                      | `step`, `reason`                                  |
| `reply`       | the run's result                       | `text` (null when the agent sent none)            |
| `error`       | a failed run                           | `code`, `message`                                 |
| `done`        | the end of the run, always last        | the run (`RunOut`)                                |

Every event of the turn carries `id: <seq>`, the run's own sequence number of the runtime event (`RunStream.last_seq`;
increasing, not contiguous: events a client does not see still count, and a run taken over after a crash continues
in a higher range). `accepted` carries the run id as its id, and `reply`, `error` and `done` none (they are made from
the run's row, not numbered events): a client that reconnects with the last id it saw (`Last-Event-ID`, to
`GET /v1/runs/{run_id}/events`) gets the events after it, then the ending again.

The summarizer's and the fact extractor's model calls are the runtime's own business, not steps: not streamed.

`reply_delta`s come while a step's answer streams in (the stream's subscriber makes the daemon ask the model for
`stream: true`): the pieces of the `send_message` text, or of a plain answer, in order, before that step's
`model_done`. Their concatenation is the reply, unless a `reply_reset` says to drop what came so far (an attempt
that failed and is retried, a note the model wrote before calling a tool, a step that did not end the turn). The
`reply` event is authoritative.
"""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterable, AsyncIterator
from typing import TYPE_CHECKING, Any, assert_never

from fastapi.sse import ServerSentEvent

from pagemind.runtime.events import (
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
from pagemind.scheduler.api.models import RunOut
from pagemind.scheduler.errors import DaemonStopping

if TYPE_CHECKING:
    from pagemind.scheduler.daemon import Daemon
    from pagemind.scheduler.streams.run_stream import RunStream

FINISH_GRACE_S = 10.0  # how long a stream waits for the run's row after its last event


class SseMapper:
    """Turns a run's events into SSE, one at a time; remembers whether the last model request was a step's, so
    that the response to the summarizer's or the extractor's request is not reported as a step's."""

    def __init__(self) -> None:
        self.in_step_call = False

    def convert(self, event: Any, seq: int | None = None) -> ServerSentEvent | None:
        """The SSE for one runtime event (with `id: <seq>` when given), or None for one a client does not see."""
        if isinstance(event, ModelRequestEvent):
            self.in_step_call = event.purpose == "step"
        elif isinstance(event, ModelResponseEvent) and not self.in_step_call:
            return None
        sse = sse_of(event)
        if sse is not None and seq is not None:
            sse.id = str(seq)
        return sse


def sse_of(event: Any) -> ServerSentEvent | None:
    """The SSE for one runtime event, or None for one a client does not see (the runtime's own model calls)."""
    match event:
        case TurnEvent():
            return ServerSentEvent(event="turn_start", data={"turn_id": event.turn_id})
        case ModelRequestEvent():
            return ServerSentEvent(event="step_start", data={"step": event.step}) if event.purpose == "step" else None
        case ModelResponseEvent():
            return ServerSentEvent(
                event="model_done",
                data={
                    "step": event.step,
                    "latency_ms": event.latency_ms,
                    "prompt_tokens": event.prompt_tokens,
                    "completion_tokens": event.completion_tokens,
                },
            )
        case ToolCallEvent():
            return ServerSentEvent(
                event="tool_call",
                data={"step": event.step, "call_id": event.call_id, "name": event.name, "arguments": event.arguments},
            )
        case ToolResultEvent():
            return ServerSentEvent(
                event="tool_result",
                data={
                    "step": event.step,
                    "call_id": event.call_id,
                    "name": event.name,
                    "content": event.content,
                    "is_error": event.is_error,
                },
            )
        case MemoryEditEvent():
            return ServerSentEvent(
                event="memory_edit",
                data={
                    "step": event.step,
                    "label": event.label,
                    "operation": event.operation,
                    "old": event.old,
                    "new": event.new,
                },
            )
        case StepEndEvent():
            return ServerSentEvent(event="step_end", data={"step": event.step, "stop_reason": event.stop_reason})
        case (
            HistoryRepairEvent()
            | PressureWarningEvent()
            | FlushEvent()
            | FlushAheadEvent()
            | PressureSqueezedEvent()
            | SalienceEvent()
        ):
            return ServerSentEvent(
                event="runtime", data={"step": event.step, "kind": event.kind, "data": dataclasses.asdict(event.data)}
            )
        case ReplyDeltaEvent():
            return ServerSentEvent(
                event="reply_delta", data={"step": event.step, "text": event.text, "source": event.source}
            )
        case ReplyResetEvent():
            return ServerSentEvent(event="reply_reset", data={"step": event.step, "reason": event.reason})
        case MemoryReadEvent():
            return None  # a trace's business (streams ask for no reads)
        case _:
            assert_never(event)


def accepted(run: RunOut) -> ServerSentEvent:
    """The first event: the run was accepted (committed to the inbox)."""
    return ServerSentEvent(event="accepted", data=run.model_dump(mode="json"), id=run.run_id)


def ending(run: RunOut) -> list[ServerSentEvent]:
    """The last events: the reply (or the error) and `done` with the run."""
    events = []
    if run.state == "done":
        events.append(ServerSentEvent(event="reply", data={"text": run.reply}))
    else:
        code = "run_failed" if run.state == "failed" else "not_finished"
        events.append(ServerSentEvent(event="error", data={"code": code, "message": run.error or f"run {run.state}"}))
    events.append(ServerSentEvent(event="done", data=run.model_dump(mode="json")))
    return events


async def turn_sse(
    item: Any, events: RunStream | None, daemon: Daemon, timeout_s: float, after: int = 0
) -> AsyncIterator[ServerSentEvent]:
    """The SSE of a run's stream (`Daemon.events`; None: a run over before it, whose events are not kept): each
    event after seq `after` as it happens, until the run ends or `timeout_s` passes, then `ending` from the run's
    row. A client that goes away (the generator closed) stops the stream, never the turn."""
    mapper = SseMapper()  # fed every event, those up to `after` too: a step's response needs its request
    timed_out = False
    try:
        async with asyncio.timeout(timeout_s):
            async for event in events if events is not None else _nothing():
                assert events is not None  # `_nothing` yields no event
                seq = events.last_seq
                sse = mapper.convert(event, seq)
                if sse is not None and seq > after:
                    yield sse
    except TimeoutError:
        timed_out = True
    finally:  # a client that went away, or the timeout: stop receiving the run's events
        if events is not None:
            await events.aclose()
    # The events end with the turn; the run's row is finished by then or a moment after.
    try:
        final = item if item.finished else await _final(item, daemon, timed_out)
    except DaemonStopping as exc:  # the message is stored and pending: say so, as the sync answer's 503 does
        yield ServerSentEvent(event="error", data={"code": "daemon_stopping", "message": str(exc)})
        yield ServerSentEvent(event="done", data=RunOut.of(item).model_dump(mode="json"))
        return
    for sse in ending(RunOut.of(final or item)):
        yield sse


async def _final(item: Any, daemon: Daemon, timed_out: bool) -> Any:
    """The run's row once its events ended (or it timed out); `DaemonStopping` when the daemon stopped meanwhile."""
    if daemon.stopped:
        raise DaemonStopping(item.run_id)
    return daemon.run(item.run_id) if timed_out else await daemon.wait(item.run_id, FINISH_GRACE_S)


async def _nothing() -> AsyncIterable[Any]:
    """No events (a run that was over before its stream started)."""
    return
    yield
