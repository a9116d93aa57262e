"""A chat-completions endpoint on a local port, for tests that run pagemind as a user does (a subprocess, the daemon):
each request's body goes to the test's `answer` function, and the completion it returns is sent back.

    with model_server(lambda body: tool_call("send_message", {"message": "hi"})) as url:   # url: .../v1
        ...

A request with `stream: true` is refused with a 400 (`stream="refuse"`: the client then asks plainly), answered
with one JSON body anyway (`"ignore"`: a server that ignores the parameter), or streamed as server-sent chunks of a
few characters (`"sse"`: the completion's content and tool-call arguments in pieces, then usage and `[DONE]`).

An answer holding `error` is sent with status 400 (a model server refusing the request).

`tool_calls` and `reply` build completions; `last_turn_message` is what a scripted model answers (the closing
system message the compiler ends a prompt with left aside); `last_user_text` the user's latest words.
"""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Literal

Answer = Callable[[dict[str, Any]], dict[str, Any]]
StreamMode = Literal["refuse", "ignore", "sse"]
PIECE = 4  # characters a streamed chunk carries
USAGE = {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110}


def _completion(message: dict[str, Any], finish: str) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:8]}",
        "object": "chat.completion",
        "created": 0,
        "model": "stub",
        "choices": [{"index": 0, "finish_reason": finish, "message": message}],
        "usage": USAGE,
    }


def tool_calls(*calls: tuple[str, dict[str, Any]]) -> dict[str, Any]:
    """A completion calling these tools, (name, arguments) each, in order."""
    made = [
        {"id": f"call_{uuid.uuid4().hex[:12]}", "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
        for n, a in calls
    ]
    return _completion({"role": "assistant", "content": None, "tool_calls": made}, "tool_calls")


def tool_call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    """A completion calling one tool."""
    return tool_calls((name, arguments))


def reply(text: str) -> dict[str, Any]:
    """A completion with a plain reply."""
    return _completion({"role": "assistant", "content": text}, "stop")


def last_turn_message(body: dict[str, Any]) -> dict[str, Any]:
    """The request's last message that is not a system message (the prompt closes with one: the turn's time and
    counts, the constraints restated)."""
    return [m for m in body.get("messages", []) if m.get("role") != "system"][-1]


def last_user_text(body: dict[str, Any]) -> str:
    """The text of the request's latest user message ("" when there is none)."""
    users = [m for m in body.get("messages", []) if m.get("role") == "user"]
    return str(users[-1].get("content") or "") if users else ""


def sse_chunks(completion: dict[str, Any]) -> list[dict[str, Any]]:
    """A completion as the chunks a provider streams: content and each call's arguments `PIECE` characters at a
    time, the finish reason, then the usage alone."""
    choice = completion["choices"][0]
    message, deltas = choice["message"], [{"role": "assistant", "content": ""}]
    text = message.get("content") or ""
    deltas += [{"content": text[i : i + PIECE]} for i in range(0, len(text), PIECE)]
    for index, call in enumerate(message.get("tool_calls") or ()):
        head = {"index": index, "id": call["id"], "type": "function"}
        deltas.append({"tool_calls": [{**head, "function": {"name": call["function"]["name"], "arguments": ""}}]})
        arguments = call["function"]["arguments"]
        for i in range(0, len(arguments), PIECE):
            deltas.append({"tool_calls": [{"index": index, "function": {"arguments": arguments[i : i + PIECE]}}]})
    base = {k: completion[k] for k in ("id", "created", "model")} | {"object": "chat.completion.chunk"}
    chunks = [{**base, "choices": [{"index": 0, "delta": d, "finish_reason": None}]} for d in deltas]
    chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": choice["finish_reason"]}]})
    return [*chunks, {**base, "choices": [], "usage": completion["usage"]}]


def _handler(answer: Answer, stream: StreamMode) -> type[BaseHTTPRequestHandler]:
    class Model(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            if not self.path.endswith("/chat/completions"):
                status, data = 400, {"error": {"message": "this stub answers chat completions only"}}
            elif body.get("stream") and stream == "refuse":
                refusal = {"message": "stream is not supported by this server", "param": "stream"}
                status, data = 400, {"error": refusal}
            else:
                data = answer(body)
                status = 400 if "error" in data else 200  # an answer may be an error (OpenAI's shape)
            if status == 200 and body.get("stream") and stream == "sse":
                self._stream(sse_chunks(data))
                return
            encoded = json.dumps(data).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(encoded)))
            self.end_headers()
            self.wfile.write(encoded)

        def _stream(self, chunks: list[dict[str, Any]]) -> None:
            events = [f"data: {json.dumps(c)}\n\n".encode() for c in chunks] + [b"data: [DONE]\n\n"]
            encoded = b"".join(events)
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("content-length", str(len(encoded)))
            self.end_headers()
            self.wfile.write(encoded)

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: a test's output is the program's."""

    return Model


@contextmanager
def model_server(answer: Answer, *, stream: StreamMode = "refuse") -> Iterator[str]:
    """The endpoint's base URL (`http://127.0.0.1:PORT/v1`), served for the block; `stream` says what a request
    with `stream: true` gets (see the module docstring)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(answer, stream))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
