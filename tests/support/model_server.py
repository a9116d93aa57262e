"""A chat-completions endpoint on a local port, for tests that run pagemind as a user does (a subprocess, the daemon):
each request's body goes to the test's `answer` function, and the completion it returns is sent back.

    with model_server(lambda body: tool_call("send_message", {"message": "hi"})) as url:   # url: .../v1
        ...

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
from typing import Any

Answer = Callable[[dict[str, Any]], dict[str, Any]]
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


def _handler(answer: Answer) -> type[BaseHTTPRequestHandler]:
    class Model(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["content-length"])))
            if body.get("stream") or not self.path.endswith("/chat/completions"):
                status, data = 400, {"error": {"message": "this stub answers plain chat completions only"}}
            else:
                status, data = 200, answer(body)
            encoded = json.dumps(data).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(encoded)))
            self.end_headers()
            self.wfile.write(encoded)

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: a test's output is the program's."""

    return Model


@contextmanager
def model_server(answer: Answer) -> Iterator[str]:
    """The endpoint's base URL (`http://127.0.0.1:PORT/v1`), served for the block."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(answer))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()
