"""Connecting to a Qdrant server: the version check runs in the connect, on the caller's thread, so a short command
that exits right after a refused connection leaves no thread behind opening a TLS context (OpenSSL crashed such a
process at exit: status 139 after the clear error line); an old server is named in a warning."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import structlog

from pagemind.runtime.memory.vectors.records import StoreError
from pagemind.runtime.memory.vectors.server import ServerBackend


class _OldQdrant(BaseHTTPRequestHandler):
    """Answers the version probe as a Qdrant 0.9 would, and every other request with a 500."""

    def do_GET(self) -> None:
        if self.path == "/":
            self._answer(200, {"title": "qdrant - vector search engine", "version": "0.9.0"})
        else:
            self._answer(500, {"status": {"error": "no"}})

    def _answer(self, status: int, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def old_qdrant() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _OldQdrant)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_a_refused_connection_leaves_no_thread_behind():
    before = set(threading.enumerate())
    with pytest.raises(StoreError, match="cannot use the Qdrant server at QDRANT_URL='http://127.0.0.1:9'"):
        ServerBackend.connect("http://127.0.0.1:9", None, "pagemind_x", 8)
    assert set(threading.enumerate()) - before == set()


def test_a_server_two_minor_versions_away_is_named_in_a_warning(old_qdrant):
    with structlog.testing.capture_logs() as logs, pytest.raises(StoreError):
        ServerBackend.connect(old_qdrant, None, "pagemind_x", 8)
    [warning] = [entry for entry in logs if entry["event"] == "qdrant_version_mismatch"]
    assert warning["server"] == "0.9.0" and warning["location"] == old_qdrant
