"""What the erasure tests share: a scripted model that files what the user says everywhere an agent keeps text,
agents that use it, and the byte scan of a state folder."""

from __future__ import annotations

import json
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

AGENT_YAML = """
name: {name}
model: {{name: gpt-4o-mini}}
system: You keep notes.
tools: [send_message, memory_rethink, archival_memory_insert, archival_search, conversation_search]
blocks:
  - label: human
    limit: 2000
    value: ""
"""


def completion(body: dict[str, Any]) -> dict[str, Any]:
    """To a user's message: its text into the `human` block and into archival memory (two tool calls); to the
    tools' results: `send_message` repeating it. So a canary said once is in the conversation, a block, its history,
    archival memory (SQL, vector payload, embedding cache) and the trace."""
    messages = body.get("messages", [])
    said = next((str(m.get("content") or "") for m in reversed(messages) if m.get("role") == "user"), "")
    chat = [m for m in messages if m.get("role") != "system"]  # the closing system message aside
    if chat and chat[-1].get("role") == "user":
        calls = [
            ("memory_rethink", {"label": "human", "new_value": f"Notes: {said}"}),
            ("archival_memory_insert", {"content": f"The user said: {said}"}),
        ]
    else:
        calls = [("send_message", {"message": f"echo: {said}"})]
    tool_calls = [
        {"id": f"call_{uuid.uuid4().hex[:12]}", "type": "function", "function": {"name": n, "arguments": json.dumps(a)}}
        for n, a in calls
    ]
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:8]}",
        "object": "chat.completion",
        "created": 0,
        "model": "stub",
        "choices": [
            {
                "index": 0,
                "finish_reason": "tool_calls",
                "message": {"role": "assistant", "content": None, "tool_calls": tool_calls},
            }
        ],
        "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
    }


class _Model(BaseHTTPRequestHandler):
    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        data = json.dumps(completion(body)).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        """Quiet."""


@contextmanager
def scripted_model() -> Iterator[str]:
    """The scripted model's base URL, served for the block."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Model)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def files_holding(home: Path, canary: str) -> list[str]:
    """Every file under `home` whose bytes hold the canary (UTF-8), relative to `home`."""
    needle = canary.encode("utf-8")
    return sorted(str(p.relative_to(home)) for p in home.rglob("*") if p.is_file() and needle in p.read_bytes())
