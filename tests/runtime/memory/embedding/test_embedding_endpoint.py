"""The OpenAI-compatible embeddings endpoint as a configured option, against a real HTTP server on the loopback
(a thread of this process; nothing leaves the machine): configured from the environment, archival memory written
and searched through it, and its bad answers turned into EmbeddingError instead of wrong vectors."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import numpy as np
import pytest

from pagemind.runtime.memory.embedding.configured import build_embedder
from pagemind.runtime.memory.embedding.embedders import EmbeddingError
from pagemind.runtime.memory.embedding.endpoint import OpenAIEmbedder
from pagemind.runtime.memory.wiring import archival_service
from pagemind.runtime.process.settings import Settings
from pagemind.runtime.spec.agent import AgentSpec
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.clock import ManualClock
from tests.runtime.memory.archival.test_archival import T0

TOPICS = [("cello", "music", "orchestra"), ("tea",), ("peanut", "allergic"), ("berlin", "moved")]
DIM = len(TOPICS) + 1


def bag_of_words(text: str) -> list[float]:
    """A toy embedding: a count per topic (words of one topic share a dimension, so meaning can match without the
    same word), plus a constant (so no vector is zero)."""
    lowered = text.lower()
    return [float(sum(lowered.count(w) for w in topic)) for topic in TOPICS] + [0.1]


Answer = Callable[[dict[str, Any]], tuple[int, Any]]


def good(body: dict[str, Any]) -> tuple[int, Any]:
    data = [{"object": "embedding", "index": i, "embedding": bag_of_words(t)} for i, t in enumerate(body["input"])]
    return 200, {
        "object": "list",
        "data": data[::-1],
        "model": body["model"],  # out of order, as some servers do
        "usage": {"prompt_tokens": 1, "total_tokens": 1},
    }


class Server:
    """A `/v1/embeddings` server in a thread; `answer` decides each response, `requests` keeps each body."""

    def __init__(self) -> None:
        self.answer: Answer = good
        self.requests: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                server.requests.append({"path": self.path, "auth": self.headers.get("Authorization"), **body})
                status, payload = server.answer(body)
                raw = payload if isinstance(payload, bytes) else json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def log_message(self, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)


@pytest.fixture
def server() -> Iterator[Server]:
    s = Server()
    s.thread.start()
    yield s
    s.httpd.shutdown()
    s.httpd.server_close()


def endpoint(server: Server, **kwargs: Any) -> OpenAIEmbedder:
    embedder = OpenAIEmbedder("toy-embed", base_url=server.url, api_key="sk-test", **kwargs)
    embedder.client = embedder.client.with_options(max_retries=0)  # a bad answer is reported at once
    return embedder


def test_archival_memory_through_a_configured_endpoint(server, tmp_path):
    env = {
        "PAGEMIND_HOME": str(tmp_path),
        "PAGEMIND_EMBEDDING_BASE_URL": server.url,
        "PAGEMIND_EMBEDDING_MODEL": "toy-embed",
        "PAGEMIND_EMBEDDING_API_KEY": "sk-test",
    }
    settings = Settings.from_env(env)
    spec = AgentSpec.model_validate(
        {"name": "lin", "model": {"name": "m"}, "system": "s", "tools": ["archival_memory_insert", "archival_search"]}
    )
    store = StateStore(make_engine(f"sqlite:///{tmp_path / 's.db'}"))
    archival = archival_service(spec, store, settings, ManualClock(T0))
    assert archival.embedder.model_id == "openai-toy-embed" and archival.embedder.dim == DIM  # probed
    cello = asyncio.run(archival.insert("Lin plays the cello in an orchestra"))
    asyncio.run(archival.insert("Lin is allergic to peanuts"))
    hits = asyncio.run(archival.search("what music does Lin make", top_k=1, count_hits=False))
    assert [h.id for h in hits] == [cello.id]
    assert {r["path"] for r in server.requests} == {"/v1/embeddings"} and server.requests[0]["auth"] == "Bearer sk-test"
    assert all(r["model"] == "toy-embed" for r in server.requests)
    assert (tmp_path / "qdrant" / f"openai-toy-embed-{DIM}").is_dir()  # a store of its own


def test_vectors_come_back_in_input_order_and_unit_length(server):
    vectors = endpoint(server, batch_size=2).embed(["tea", "cello cello", "peanut"])
    assert [len(r["input"]) for r in server.requests] == [2, 1]
    assert np.allclose(np.linalg.norm(vectors, axis=1), 1.0)
    assert [int(np.argmax(v)) for v in vectors] == [1, 0, 2]


@pytest.mark.parametrize(
    "answer, message",
    [
        (
            lambda body: (200, {"object": "list", "model": "toy", "data": good(body)[1]["data"][:1]}),
            "1 vectors .* for 2 texts",
        ),
        (
            lambda body: (
                200,
                {
                    "object": "list",
                    "model": "toy",
                    "data": [
                        {"object": "embedding", "index": i, "embedding": [1.0] * (3 + i)}
                        for i in range(len(body["input"]))
                    ],
                },
            ),
            r"size \[3, 4\]",
        ),
        (
            lambda body: (400, {"error": {"message": "input too long", "type": "invalid_request_error"}}),
            "input too long",
        ),
        (lambda body: (200, b"<html>gateway says hello</html>"), "endpoint failed"),
    ],
)
def test_a_bad_answer_is_an_embedding_error(server, answer, message):
    server.answer = answer
    with pytest.raises(EmbeddingError, match=message):
        endpoint(server).embed(["tea", "cello"])


def test_vectors_of_another_size_than_configured_are_refused(server):
    with pytest.raises(EmbeddingError, match="expected 16"):
        endpoint(server, dim=16).embed(["tea"])


def test_a_failed_insert_stores_nothing(server, tmp_path):
    settings = Settings(
        home=tmp_path,
        database_url="sqlite://",
        embedding_base_url=server.url,
        embedding_model="toy-embed",
        embedding_dim=DIM,
    )
    spec = AgentSpec.model_validate({"name": "lin", "model": {"name": "m"}, "system": "s"})
    store = StateStore(make_engine(f"sqlite:///{tmp_path / 's.db'}"))
    archival = archival_service(spec, store, settings, ManualClock(T0))
    archival.embedder.inner.client = archival.embedder.inner.client.with_options(max_retries=0)
    server.answer = lambda body: (200, {"object": "list", "model": "toy", "data": []})
    with pytest.raises(EmbeddingError):
        asyncio.run(archival.insert("Lin moved to Berlin"))
    assert archival.list() == [] and build_embedder(settings).model_id == "openai-toy-embed"
