"""A real OpenAI-compatible HTTP server on 127.0.0.1, in a thread, for the faults that need a socket: a server that
hangs after reading the request, and one that trickles its answer a byte at a time (httpx's read timeout restarts
with every byte, so only an overall deadline per attempt ends it).

Each request takes the next scripted behaviour; the test never sleeps (the server's own waits end when it stops).
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Hang:
    """Read the request, then answer nothing until the server stops."""


@dataclass(frozen=True)
class Trickle:
    """Send status and headers for a long body, then `piece` (one byte) every `interval_s` until the client gives
    up; a streamed trickle sends an event stream's pieces (keep-alives, or a chunk of one token)."""

    interval_s: float = 0.02
    piece: bytes = b" "
    content_type: str = "application/json"


@dataclass(frozen=True)
class Cut:
    """Send status and headers announcing a longer body, then `sent` of it, then close the connection."""

    sent: bytes = b'{"id": "chatcmpl-cut", "choices": ['


@dataclass(frozen=True)
class Reply:
    """Answer at once: a JSON body (a dict or list) or raw bytes, with a status and headers."""

    body: Any
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)


class FaultServer:
    """Serves `script` in order at `url` (`/v1/chat/completions`); keeps the JSON bodies of the requests."""

    def __init__(self, *script: Any):
        self.script: list[Any] = list(script)
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []  # each request's headers, names in lower case
        self.paths: list[str] = []
        self.stopped = threading.Event()
        self._lock = threading.Lock()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # keep test output clean
                pass

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                with outer._lock:
                    outer.requests.append(json.loads(body))
                    outer.headers.append({name.lower(): value for name, value in self.headers.items()})
                    outer.paths.append(self.path)
                    item = outer.script.pop(0) if outer.script else Reply({"error": "script exhausted"}, 418)
                outer._serve(self, item)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.httpd.block_on_close = False
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def add(self, *items: Any) -> None:
        """Queue more behaviours."""
        with self._lock:
            self.script.extend(items)

    def _serve(self, handler: BaseHTTPRequestHandler, item: Any) -> None:
        try:
            if isinstance(item, Hang):
                self.stopped.wait(60)
                return
            if isinstance(item, Trickle):
                handler.send_response(200)
                handler.send_header("content-type", item.content_type)
                handler.send_header("content-length", "10000000")
                handler.end_headers()
                while not self.stopped.wait(item.interval_s):
                    handler.wfile.write(item.piece)
                    handler.wfile.flush()
                return
            if isinstance(item, Cut):
                handler.send_response(200)
                handler.send_header("content-type", "application/json")
                handler.send_header("content-length", str(len(item.sent) + 1000))
                handler.end_headers()
                handler.wfile.write(item.sent)
                handler.wfile.flush()
                handler.close_connection = True
                return
            data = item.body if isinstance(item.body, bytes) else json.dumps(item.body).encode()
            handler.send_response(item.status)
            handler.send_header("content-type", item.headers.get("content-type", "application/json"))
            for name, value in item.headers.items():
                if name != "content-type":
                    handler.send_header(name, value)
            handler.send_header("content-length", str(len(data)))
            handler.end_headers()
            handler.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up: that is the point of these faults

    def __enter__(self) -> FaultServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stopped.set()
        self.httpd.shutdown()
        self.httpd.server_close()
