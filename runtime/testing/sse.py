"""Test doubles for streamed completions: what an OpenAI-compatible provider sends for `stream: true`, built from
the chat-completion body it would have answered without streaming (`runtime.testing.responses` builds those bodies;
`ScriptedOpenAI` answers a streamed request with `streamed_response` of its next body).

The stream is the strict one: a keep-alive comment first, the role alone, the content a few characters a chunk,
each tool call's id and name and then its arguments a few characters a chunk, the finish reason, a usage-only last
chunk (`choices: []`), `data: [DONE]`; and the bytes go out in small pieces that split lines, JSON and UTF-8
characters anywhere. `stop_after` cuts the stream after that many bytes (as a dropped connection would: the body
just ends, or with `broken=True` the transport fails).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx


def _chunk(body: dict[str, Any], delta: dict[str, Any], finish_reason: str | None = None) -> dict[str, Any]:
    return {
        "id": body.get("id", "chatcmpl-stream"),
        "object": "chat.completion.chunk",
        "created": body.get("created", 0),
        "model": body.get("model", "scripted"),
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}],
    }


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def stream_chunks(body: dict[str, Any], size: int = 3) -> list[dict[str, Any]]:
    """The chunks a provider streams for the completion `body` (text in pieces of `size` characters)."""
    choice = body["choices"][0]
    message = choice["message"]
    chunks = [_chunk(body, {"role": "assistant", "content": ""})]
    for piece in _pieces(message.get("content") or "", size):
        chunks.append(_chunk(body, {"content": piece}))
    for index, call in enumerate(message.get("tool_calls") or ()):
        function = call["function"]
        chunks.append(
            _chunk(
                body,
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call["id"],
                            "type": "function",
                            "function": {"name": function["name"], "arguments": ""},
                        }
                    ]
                },
            )
        )
        for piece in _pieces(function.get("arguments") or "", size):
            chunks.append(_chunk(body, {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
    chunks.append(_chunk(body, {}, choice.get("finish_reason") or "stop"))
    if body.get("usage"):
        chunks.append({**_chunk(body, {}), "choices": [], "usage": body["usage"]})
    return chunks


def sse_bytes(chunks: list[dict[str, Any]], done: bool = True) -> bytes:
    """The event stream of `chunks`: a keep-alive comment first, one `data:` event each, then `[DONE]`."""
    events = [": keep-alive\n\n"] + [f"data: {json.dumps(c, ensure_ascii=False)}\n\n" for c in chunks]
    return "".join(events + (["data: [DONE]\n\n"] if done else [])).encode()


class _Pieces(httpx.AsyncByteStream):
    """A body sent in `cut`-byte pieces, ending (or failing) after `stop_after` bytes when given."""

    def __init__(self, data: bytes, cut: int, stop_after: int | None, broken: bool):
        self.data, self.cut, self.stop_after, self.broken = data, cut, stop_after, broken

    async def __aiter__(self) -> AsyncIterator[bytes]:
        data = self.data if self.stop_after is None else self.data[: self.stop_after]
        for start in range(0, len(data), self.cut):
            yield data[start : start + self.cut]
        if self.stop_after is not None and self.broken:
            raise httpx.RemoteProtocolError("peer closed connection without sending complete message body")


def streamed_response(
    body: dict[str, Any], *, size: int = 3, cut: int = 5, stop_after: int | None = None, broken: bool = False
) -> httpx.Response:
    """The HTTP response of a provider streaming `body` (see the module docstring)."""
    data = sse_bytes(stream_chunks(body, size))
    return httpx.Response(
        200, headers={"content-type": "text/event-stream; charset=utf-8"}, stream=_Pieces(data, cut, stop_after, broken)
    )
