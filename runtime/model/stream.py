"""A streamed chat completion (`stream: true`), read as server-sent events and assembled into the body the same
request would have answered without streaming, so that it is validated, stored and traced exactly like one.

The wire, as providers really send it: `data: {chunk}` events split anywhere by the network (inside a line, inside a
UTF-8 character), keep-alive comments (`: ping`), `event:` lines, an `error` object in a chunk or instead of the
stream, a usage-only last chunk (`choices: []`, asked for with `stream_options.include_usage`), `data: [DONE]` at the
end — or a provider that ignores `stream` and answers with one JSON body (used as is), an HTML page or a JSON error
with status 200 (the same `ModelBadResponse`s as without streaming), or a stream that stops mid-way (a transient
`ModelBadResponse`: the client retries the call as a whole).

While chunks arrive, the text fragments are handed to a `DeltaSink` (the agent's reply stream): the assistant's
content, and each tool call's argument fragments (raw JSON, as they come).
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from pagemind.runtime.model.response import (
    ModelBadResponse,
    ModelResponse,
    one_line,
    response_from_body,
    response_from_http,
)

if TYPE_CHECKING:
    import httpx

    from pagemind.runtime.model.transports import Poster

STREAM_OPTIONS: dict[str, Any] = {"stream": True, "stream_options": {"include_usage": True}}
"""What a streamed request adds to the body (on the wire only: traces record the body without it)."""


class DeltaSink(Protocol):
    """Who hears the fragments of an answer as they arrive (`runtime.reply_stream.ReplyStream`)."""

    def content(self, text: str) -> None:
        """A fragment of the assistant's content."""

    def tool_arguments(self, index: int, name: str, fragment: str) -> None:
        """A fragment of the raw JSON arguments of tool call `index` (whose name is `name` so far)."""

    def discard(self, reason: str) -> None:
        """What was handed over since the call began is void (the attempt failed; the call may be retried)."""


@dataclass
class _Call:
    id: str = ""
    type: str = "function"
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass
class ChunkAssembler:
    """Chunks in, one chat-completion body out: content and tool-call arguments joined, the last finish reason,
    the usage (from whichever chunk carries it), the id, model and creation time of the first chunk."""

    sink: DeltaSink | None = None
    head: dict[str, Any] = field(default_factory=dict)
    content: list[str] = field(default_factory=list)
    refusal: list[str] = field(default_factory=list)
    calls: dict[int, _Call] = field(default_factory=dict)
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    chunks: int = 0

    def add(self, chunk: Any) -> None:
        """Take one parsed chunk (raises ModelBadResponse for an error or something that is not a chunk)."""
        if not isinstance(chunk, dict):
            raise ModelBadResponse(f"a stream chunk is a JSON {type(chunk).__name__}, not an object", transient=True)
        if chunk.get("error"):  # a provider that fails mid-stream says so in a chunk
            error = chunk["error"]
            detail = error.get("message") if isinstance(error, dict) else error
            raise ModelBadResponse(f"the endpoint reported an error mid-stream: {one_line(str(detail))}", True)
        self.chunks += 1
        for key in ("id", "created", "model", "system_fingerprint"):
            if key not in self.head and chunk.get(key) is not None:
                self.head[key] = chunk[key]
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        choices = chunk.get("choices")
        if not isinstance(choices, list):
            return
        for choice in choices:
            if isinstance(choice, dict) and choice.get("index", 0) == 0:
                self._choice(choice)

    def _choice(self, choice: dict[str, Any]) -> None:
        if choice.get("finish_reason") is not None:
            self.finish_reason = choice["finish_reason"]
        delta = choice.get("delta")
        if not isinstance(delta, dict):
            return
        text = delta.get("content")
        if isinstance(text, str) and text:
            self.content.append(text)
            if self.sink is not None:
                self.sink.content(text)
        if isinstance(delta.get("refusal"), str):
            self.refusal.append(delta["refusal"])
        for position, raw in enumerate(delta.get("tool_calls") or ()):
            if isinstance(raw, dict):
                self._call_fragment(position, raw)

    def _call_fragment(self, position: int, raw: dict[str, Any]) -> None:
        index = given if isinstance(given := raw.get("index"), int) else position  # some servers leave it out
        call = self.calls.setdefault(index, _Call())
        call.id = call.id or str(raw.get("id") or "")
        call.type = str(raw.get("type") or call.type)
        function = found if isinstance(found := raw.get("function"), dict) else {}
        name = function.get("name")
        if isinstance(name, str) and name and name != call.name:  # OpenAI sends it once; some servers repeat it
            call.name += name
        fragment = function.get("arguments")
        if isinstance(fragment, (dict, list)):  # a whole object at once, as some servers do without streaming
            fragment = json.dumps(fragment, ensure_ascii=False)
        if isinstance(fragment, str) and fragment:
            call.arguments.append(fragment)
            if self.sink is not None:
                self.sink.tool_arguments(index, call.name, fragment)

    def body(self) -> dict[str, Any]:
        """The chat-completion body these chunks make (what the request would have returned without streaming)."""
        message: dict[str, Any] = {"role": "assistant", "content": "".join(self.content) if self.content else None}
        if self.refusal:
            message["refusal"] = "".join(self.refusal)
        if self.calls:
            message["tool_calls"] = [
                {"id": c.id, "type": c.type, "function": {"name": c.name, "arguments": "".join(c.arguments)}}
                for _, c in sorted(self.calls.items())
            ]
        body: dict[str, Any] = {
            "id": self.head.get("id", ""),
            "object": "chat.completion",
            "created": self.head.get("created", 0),
            "model": self.head.get("model", ""),
        }
        if "system_fingerprint" in self.head:
            body["system_fingerprint"] = self.head["system_fingerprint"]
        body["choices"] = [{"index": 0, "message": message, "finish_reason": self.finish_reason}]
        if self.usage is not None:
            body["usage"] = self.usage
        return body


async def sse_events(lines: AsyncIterator[str]) -> AsyncIterator[tuple[str, str]]:
    """(event name, data) per server-sent event: `data:` lines joined by newlines, comments skipped, an event ended
    by a blank line. An event the body ends in the middle of is dropped, as the SSE standard says (a chunk cut
    short), except a bare `[DONE]` without its blank line."""
    name = ""
    data: list[str] = []
    async for line in lines:
        if not line:
            if data:
                yield name or "message", "\n".join(data)
            name, data = "", []
            continue
        if line.startswith(":"):  # a comment: keep-alive
            continue
        key, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if key == "data":
            data.append(value)
        elif key == "event":
            name = value
    if data == ["[DONE]"]:
        yield name or "message", "[DONE]"


async def post_streamed(poster: Poster, content: bytes, sink: DeltaSink | None) -> ModelResponse:
    """POST a streamed chat-completions request (`content`: the body, `STREAM_OPTIONS` in it) and read its answer.
    The poster checks the status (the SDK's typed errors, the body read) and hands back the unread httpx response."""
    response = await poster.post(content, stream=True)
    try:
        return await read_streamed(response, sink)
    finally:
        await response.aclose()


async def read_streamed(response: httpx.Response, sink: DeltaSink | None) -> ModelResponse:
    """The validated response of a streamed request's HTTP response (status 2xx, body not yet read).

    A body that is not an event stream is read whole and parsed as without streaming (a provider that ignored
    `stream`, an HTML page, a JSON error). A stream that ends before `[DONE]` and before a finish reason, or breaks
    on the wire, is a transient ModelBadResponse."""
    import httpx

    if "text/event-stream" not in response.headers.get("content-type", ""):
        await response.aread()
        return response_from_http(response)
    assembler = ChunkAssembler(sink)
    done = False
    try:
        async for name, data in sse_events(response.aiter_lines()):
            if data.strip() == "[DONE]":
                done = True
                break
            try:
                chunk = json.loads(data)
            except ValueError:
                raise ModelBadResponse(f"a stream chunk is not JSON: {one_line(data, 120)}", transient=True) from None
            if name == "error" and isinstance(chunk, dict) and "error" not in chunk:
                chunk = {"error": chunk}
            assembler.add(chunk)
    except httpx.TransportError as exc:  # the connection dropped, or went silent past the read timeout
        raise ModelBadResponse(
            f"the stream broke after {assembler.chunks} chunks: {type(exc).__name__}: {one_line(str(exc), 120)}",
            transient=True,
        ) from exc
    if not done and assembler.finish_reason is None:
        raise ModelBadResponse(f"the stream stopped after {assembler.chunks} chunks, before its end", transient=True)
    return response_from_body(assembler.body())


_STREAM_WORD = re.compile(r"\bstream(?:_options)?\b", re.IGNORECASE)


def refuses_streaming(exc: Exception) -> bool:
    """Whether a rejected request was refused for its `stream` parameters (HTTP 400/422 naming them): then plain
    requests work. Not any 4xx whose text holds "stream": a gateway's "upstream error" must not turn streaming off
    for the client's life."""
    cause = exc.__cause__
    if getattr(cause, "status_code", None) not in (400, 422):
        return False
    return getattr(cause, "param", None) in ("stream", "stream_options") or bool(_STREAM_WORD.search(str(exc)))
