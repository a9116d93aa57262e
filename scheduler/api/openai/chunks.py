"""A turn as OpenAI's stream: `data: {chat.completion.chunk}` events, then `data: [DONE]`.

The first chunk says `role: assistant`; then the reply's text as the agent writes it (the `send_message` text,
`runtime.reply_stream`: the daemon asks the model to stream because this route watches the run, and a model
server that answers one JSON body anyway still works: the reply then comes in one piece at the end); a last chunk
with `finish_reason`. The agent's memory tools, their results and its notes stay inside: the app sees the reply.

Chunks cannot be taken back, so what is sent is always a prefix of the reply: text the model writes as plain
content comes whole when the turn ends (content before a tool call is the model's note, not the reply), and a
`send_message` text that turns out not to be the reply (a failed attempt retried, a second reply call) stops the
live text; if the reply then does not continue what was sent, the stream ends with an error event
(`reply_changed`), and sending the same request again returns the stored reply whole. A turn that fails, or runs
past the wait, ends with an error event in OpenAI's shape (the SDK raises it as `APIError`).

A turn that paused for the app's own tools ends with their calls as tool-call deltas, as OpenAI streams them: per
call a first delta with its index, id, type and name, then its arguments in pieces; then the finish chunk
(`tool_calls`) and `[DONE]`.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterable, AsyncIterator
from typing import Any

from pagemind.runtime.app_calls import NothingToResume
from pagemind.runtime.events import ReplyDeltaEvent, ReplyResetEvent
from pagemind.scheduler.api.openai.bodies import chunk
from pagemind.scheduler.api.openai.errors import openai_error_body
from pagemind.scheduler.daemon import Daemon
from pagemind.scheduler.errors import DaemonStopping
from pagemind.scheduler.queue.inbox_item import InboxItem
from pagemind.scheduler.streams.run_stream import RunStream

FINISH_GRACE_S = 10.0  # how long the stream waits for the run's row after its last event
ARGUMENT_PIECE = 32  # characters of a call's arguments per delta
DONE = "data: [DONE]\n\n"
NOTHING_TO_RESUME = NothingToResume.__name__  # a run's error begins with its exception's name


def finish_reason(item: InboxItem) -> str:
    """OpenAI's `finish_reason` of a finished turn: `tool_calls` when it paused for the app's tools, `length` when
    it ran out of steps, else `stop`."""
    if calls_of(item):
        return "tool_calls"
    return "length" if (item.result or {}).get("stop_reason") == "max_steps" else "stop"


def calls_of(item: InboxItem) -> list[dict[str, Any]]:
    """The app's calls a finished turn paused for (id, name, arguments); none for a turn that ended."""
    calls = (item.result or {}).get("tool_calls")
    return calls if isinstance(calls, list) else []


def call_deltas(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The `delta`s that stream the calls: per call its head (index, id, type, name), then its arguments' pieces."""
    deltas: list[dict[str, Any]] = []
    for index, call in enumerate(calls):
        function = {"name": call["name"], "arguments": ""}
        head = {"index": index, "id": call["id"], "type": "function", "function": function}
        deltas.append({"tool_calls": [head]})
        arguments = call["arguments"] or ""
        for start in range(0, len(arguments), ARGUMENT_PIECE):
            piece = arguments[start : start + ARGUMENT_PIECE]
            deltas.append({"tool_calls": [{"index": index, "function": {"arguments": piece}}]})
    return deltas


def error_event(status: int, code: str, message: str) -> str:
    """An error as the stream's last event."""
    return f"data: {json.dumps(openai_error_body(status, code, message))}\n\n"


def failure(item: InboxItem | None, run_id: str) -> tuple[int, str, str] | None:
    """(status, code, message) of a turn that did not end with a reply (None: it did)."""
    if item is None or not item.finished:
        return 504, "turn_unfinished", f"the turn (run {run_id}) is still running; send the same request again later"
    if item.state == "failed" and (item.error or "").startswith(NOTHING_TO_RESUME):
        return 400, "no_pending_calls", "the tool results answer no call the agent handed out, and no user message came"
    if item.state == "failed":
        return 500, "run_failed", f"the agent's turn failed (run {run_id}): {item.error or 'see the daemon log'}"
    return None


async def completion_chunks(
    item: InboxItem, events: RunStream | None, daemon: Daemon, model: str, timeout_s: float
) -> AsyncIterator[str]:
    """The stream's events for a submitted item (see the module docstring); `events` None: a run already over."""
    run_id, created = item.run_id, item.created_at
    yield chunk(run_id, created, model, {"role": "assistant", "content": ""})
    sent, diverged, timed_out = "", False, False
    try:
        async with asyncio.timeout(timeout_s):
            async for event in events if events is not None else _nothing():
                if isinstance(event, ReplyDeltaEvent) and event.source != "content" and not diverged and event.text:
                    sent += event.text
                    yield chunk(run_id, created, model, {"content": event.text})
                elif isinstance(event, ReplyResetEvent) and sent:
                    diverged = True
    except TimeoutError:
        timed_out = True
    finally:  # the client went away, or the wait ended: the turn goes on in the inbox
        if events is not None:
            await events.aclose()
    try:
        final = item if item.finished else await _final(item, daemon, timed_out)
    except DaemonStopping as exc:
        yield error_event(503, "daemon_stopping", str(exc))
        return
    failed = failure(final, run_id)
    if failed is not None:
        yield error_event(*failed)
        return
    assert final is not None  # `failure` said it finished
    reply = (final.result or {}).get("reply") or ""
    if not reply.startswith(sent):
        yield error_event(500, "reply_changed", f"the reply changed after it was streamed; resend for run {run_id}")
        return
    if reply[len(sent) :]:
        yield chunk(run_id, created, model, {"content": reply[len(sent) :]})
    for delta in call_deltas(calls_of(final)):
        yield chunk(run_id, created, model, delta)
    yield chunk(run_id, created, model, {}, finish_reason(final))
    yield DONE


async def _final(item: InboxItem, daemon: Daemon, timed_out: bool) -> InboxItem | None:
    if daemon.stopped:
        raise DaemonStopping(item.run_id)
    return daemon.run(item.run_id) if timed_out else await daemon.wait(item.run_id, FINISH_GRACE_S)


async def _nothing() -> AsyncIterable[Any]:
    return
    yield
