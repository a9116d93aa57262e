"""The model client's wire format and its shared connection pools.

The client posts the compiled body through the SDK's generic `post` (no per-field transform); these tests prove
the bytes are the JSON `client.chat.completions.create` would send, and that agents of one endpoint share one SDK
client (one keep-alive pool) per event loop.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from datetime import UTC, datetime

import httpx
import pytest
import respx

from pagemind.runtime.agent import Agent
from pagemind.runtime.compiler import ContextInputs, MemoryStats, WireCache, compile_context
from pagemind.runtime.messages import Message
from pagemind.runtime.model.client import ModelRequest, OpenAIModelClient
from pagemind.runtime.model.pool import Endpoint, pooled_clients, shared_client
from pagemind.runtime.spec.agent import ModelSpec
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.responses import tool_call_body
from pagemind.runtime.testing.specs import build_spec, spec_data
from pagemind.tools import ToolCall

BASE = "http://wire.test/v1"
NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def a_request(cache: WireCache | None = None) -> ModelRequest:
    """A compiled step request with every kind of message: system, user, assistant with tool calls (one with
    non-ASCII arguments), tool results (one an error), a plain assistant reply, and the agent's tool schemas."""
    spec = build_spec()
    append = json.dumps({"label": "human", "content": "Lin, café ☕"}, ensure_ascii=False)
    calls = (
        ToolCall("call_1", "core_memory_append", append),
        ToolCall("call_2", "archival_search", '{"query": "peanuts"}'),
    )
    messages = (
        Message("user", "Hi, I'm Lin. I'm allergic to peanuts.", NOW),
        Message("assistant", None, NOW, tool_calls=calls),
        Message("tool", "Appended.", NOW, tool_call_id="call_1", name="core_memory_append"),
        Message("tool", "Error: nothing found", NOW, tool_call_id="call_2", name="archival_search", is_error=True),
        Message("assistant", "Nice to meet you, Lin.", NOW),
    )
    compiled = compile_context(
        ContextInputs(
            system=spec.system,
            blocks=(),
            messages=messages,
            stats=MemoryStats(NOW, 5, 5),
            wire_cache=cache,
            tools=tuple(t.openai_schema() for t in spec.resolved_tools().values()),
        )
    )
    return ModelRequest("gpt-4o-mini", compiled.messages, compiled.tools, 0.7, 800, encoded_messages=compiled.encoded)


async def test_the_bytes_sent_are_the_json_the_sdk_create_would_send():
    import openai

    request, joined = a_request(), a_request(WireCache())  # the body encoded whole, and joined from parts
    assert request.encoded_messages is None and joined.encoded_messages is not None
    sent: list[bytes] = []

    def answer(http: httpx.Request) -> httpx.Response:
        assert http.headers["content-type"] == "application/json"
        sent.append(http.content)
        return httpx.Response(200, json=tool_call_body("send_message", {"message": "ok"}))

    sdk = openai.AsyncOpenAI(api_key="k", base_url=BASE, max_retries=0)
    with respx.mock(base_url=BASE) as router:
        router.post("/chat/completions").mock(side_effect=answer)
        await OpenAIModelClient(sdk).complete(request)
        await sdk.chat.completions.create(**request.body())
        await OpenAIModelClient(sdk).complete(joined)
    ours, sdks, ours_joined = sent
    assert ours_joined == ours
    assert json.loads(ours) == json.loads(sdks)
    assert any(m.get("tool_calls") for m in json.loads(ours)["messages"])  # the request really had them
    assert len(json.loads(ours)["tools"]) == len(build_spec().tools)
    # Same serializer (compact separators, UTF-8, non-ASCII kept): byte for byte the same once the top-level keys
    # are in the SDK's order (its parameter order; ours puts `model` first, as traces record it).
    in_sdk_order = {key: json.loads(ours)[key] for key in json.loads(sdks)}
    assert json.dumps(in_sdk_order, ensure_ascii=False, separators=(",", ":")).encode() == sdks
    assert "café ☕".encode() in ours


def two_endpoint_specs():
    same = spec_data("a", model={"name": "m", "base_url": "http://one.test/v1"})
    return (
        build_spec("a", model=same["model"]),
        build_spec("b", model=same["model"]),
        build_spec("c", model={"name": "m", "base_url": "http://two.test/v1"}),
        build_spec("d", model={"name": "m", "base_url": "http://one.test/v1", "request_timeout_s": 5}),
    )


async def test_agents_of_one_endpoint_share_one_client_and_pool(sqlite_url):
    store = StateStore(make_engine(sqlite_url))
    a, b, c, d = [await Agent.load(spec, store=store) for spec in two_endpoint_specs()]
    assert a.model is not b.model  # each agent has its own retry policy object ...
    assert a.model.client is b.model.client  # ... over one SDK client
    assert a.model.client._client is b.model.client._client  # one httpx pool
    assert c.model.client is not a.model.client  # another server
    assert d.model.client is not a.model.client  # other timeouts
    with respx.mock(base_url="http://one.test/v1") as router:
        route = router.post("/chat/completions").mock(
            return_value=httpx.Response(200, json=tool_call_body("send_message", {"message": "ok"}))
        )
        assert await a.send("hi") == "ok" and await b.send("hi") == "ok"
    assert route.call_count == 2


def test_each_event_loop_gets_its_own_client():
    endpoint = Endpoint("http://one.test/v1", "k", 60, 10)

    async def twice() -> tuple[object, object]:
        return shared_client(endpoint), shared_client(endpoint)

    first, again = asyncio.run(twice())
    assert first is again
    other, _ = asyncio.run(twice())
    assert other is not first  # a pool never crosses loops
    client = OpenAIModelClient.from_spec(ModelSpec(name="m"), {"OPENAI_BASE_URL": "http://one.test/v1"})
    assert client.client is not client.client  # outside a loop: never a shared one


SERVER = r"""
import itertools, json, sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
connections = itertools.count(1)
BODY = json.dumps({"choices": [{"message": {"role": "assistant", "content": "ok"}}]}).encode()

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def setup(self):
        super().setup()
        self.connection_number = next(connections)

    def do_POST(self):
        self.rfile.read(int(self.headers.get("content-length", 0)))
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(BODY)))
        self.send_header("x-connection", str(self.connection_number))
        self.end_headers()
        self.wfile.write(BODY)

    def log_message(self, *args):
        pass

server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


@pytest.fixture
def local_server():
    """An OpenAI-compatible endpoint in another process that numbers the TCP connections it accepts."""
    process = subprocess.Popen([sys.executable, "-c", SERVER], stdout=subprocess.PIPE, text=True)
    try:
        yield f"http://127.0.0.1:{process.stdout.readline().strip()}/v1"
    finally:
        process.kill()
        process.wait()


def test_agents_of_one_endpoint_use_one_keep_alive_connection_and_closed_loops_let_go(local_server):
    spec, env = ModelSpec(name="m"), {"OPENAI_BASE_URL": local_server}

    async def three_calls() -> set[str]:
        seen = set()
        for client in [OpenAIModelClient.from_spec(spec, env) for _ in range(3)]:  # three agents' clients
            await client.complete(REQUEST)
            raw = await client.client.post("/chat/completions", body={}, cast_to=httpx.Response)
            seen.add(raw.headers["x-connection"])
        return seen

    first = asyncio.run(three_calls())
    assert len(first) == 1  # every call on one connection
    second = asyncio.run(three_calls())
    assert len(second) == 1 and second != first  # a new loop, a new pool (a pool never crosses loops)
    assert pooled_clients() == 1  # the closed loop's pool was let go


REQUEST = ModelRequest("m", [{"role": "user", "content": "hi"}], [], 0.5, 10)
