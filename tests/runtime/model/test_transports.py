"""The lean POST (`runtime.model.transports`): what goes out and what comes back is what the SDK's `post` would send and
raise, over respx and over a real local server; clients that need the SDK's per-call hooks keep its `post`."""

from __future__ import annotations

import asyncio
import gc
import json
import subprocess
import sys
import weakref

import httpx
import openai
import pytest
import respx

from pagemind.runtime.model.client import (
    ContextLengthExceeded,
    ModelBadResponse,
    ModelRequest,
    ModelRequestRejected,
    ModelUnavailable,
    OpenAIModelClient,
)
from pagemind.runtime.model.pool import Endpoint, shared_client
from pagemind.runtime.model.posters import poster_for
from pagemind.runtime.model.transports import PATH, SHARDS, LeanPost, SdkPost, is_plain, plain_transport
from pagemind.runtime.spec.agent import ModelSpec
from pagemind.runtime.testing.endpoint import http_error
from pagemind.runtime.testing.responses import tool_call_body

BASE = "http://lean.test/v1"
BODY = json.dumps({"model": "m", "messages": [{"role": "user", "content": "café ☕"}]}, ensure_ascii=False).encode()


def sdk(**kwargs) -> openai.AsyncOpenAI:
    return openai.AsyncOpenAI(api_key="sk-test", base_url=BASE, max_retries=0, **kwargs)


async def both(client: openai.AsyncOpenAI, answer: httpx.Response | Exception, stream: bool = False) -> list:
    """What the SDK's post and the lean post each give (a response or the exception raised) for one answer, and
    the two requests as they arrived."""
    seen: list[httpx.Request] = []

    def handle(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if isinstance(answer, Exception):
            raise answer
        return httpx.Response(answer.status_code, content=answer.content, headers=answer.headers)

    outcomes = []
    with respx.mock(base_url=BASE) as router:
        router.post(PATH).mock(side_effect=handle)
        for poster in (SdkPost(client), LeanPost(client)):
            try:
                outcomes.append(await poster.post(BODY, stream=stream))
            except Exception as exc:
                outcomes.append(exc)
    return [*outcomes, *seen]


async def test_the_lean_post_sends_what_the_sdk_post_sends():
    client = sdk(organization="org-1", default_headers={"X-Extra": "yes"})
    theirs, ours, sent_theirs, sent_ours = await both(client, httpx.Response(200, json={"ok": True}))
    assert ours.json() == theirs.json() == {"ok": True}
    assert sent_ours.url == sent_theirs.url and sent_ours.content == sent_theirs.content == BODY
    assert dict(sent_ours.headers) == dict(sent_theirs.headers)  # auth, organization, custom, platform, stainless
    assert sent_ours.headers["authorization"] == "Bearer sk-test" and sent_ours.headers["x-extra"] == "yes"
    assert sent_ours.extensions["timeout"] == sent_theirs.extensions["timeout"]


@pytest.mark.parametrize("status", [400, 401, 403, 404, 409, 422, 429, 500, 503])
@pytest.mark.parametrize("stream", [False, True])
async def test_a_failed_status_raises_the_sdk_s_own_error(status, stream):
    answer = http_error(status, f"failure {status}", code="some_code", headers={"retry-after": "3"})
    theirs, ours, *_ = await both(sdk(), answer, stream=stream)
    assert type(ours) is type(theirs) and isinstance(ours, openai.APIStatusError)
    assert (ours.status_code, ours.body, ours.code, str(ours)) == (
        theirs.status_code,
        theirs.body,
        theirs.code,
        str(theirs),
    )
    assert ours.response.headers["retry-after"] == "3"  # what the retry policy reads


@pytest.mark.parametrize(
    "failure, kind",
    [
        (httpx.ReadTimeout("slow"), openai.APITimeoutError),
        (httpx.ConnectError("refused"), openai.APIConnectionError),
        (httpx.RemoteProtocolError("cut"), openai.APIConnectionError),
    ],
)
async def test_a_transport_failure_raises_the_sdk_s_own_error(failure, kind):
    theirs, ours, *_ = await both(sdk(), failure)
    assert type(ours) is type(theirs) is kind
    assert isinstance(ours.__cause__, type(failure))


async def test_a_streamed_post_hands_back_the_unread_response():
    _, ours, *_ = await both(
        sdk(),
        httpx.Response(200, content=b"data: [DONE]\n\n", headers={"content-type": "text/event-stream"}),
        stream=True,
    )
    assert not ours.is_stream_consumed
    assert [line async for line in ours.aiter_lines()] == ["data: [DONE]", ""]


async def test_the_lean_post_keeps_cookies_and_follows_redirects_as_the_sdk_post_does():
    """The lean post sends on the transport itself, past httpx's cookie jar and redirect handling: a cookie a
    response sets still goes out with every later request (whichever pool sends it), and a redirect is followed."""

    async def seen_by(poster) -> list[tuple[str, str | None]]:
        seen: list[tuple[str, str | None]] = []

        def record(answer: httpx.Response):
            def handle(request: httpx.Request) -> httpx.Response:
                seen.append((request.url.path, request.headers.get("cookie")))
                return answer

            return handle

        with respx.mock(base_url=BASE) as router:
            router.post(PATH).mock(side_effect=record(httpx.Response(307, headers={"location": f"{BASE}/moved"})))
            router.post("/moved").mock(
                side_effect=record(
                    httpx.Response(200, json={"ok": True}, headers={"set-cookie": "affinity=a1; Path=/"})
                )
            )
            for _ in range(SHARDS + 1):
                assert (await poster.post(BODY)).json() == {"ok": True}
        return seen

    lean = LeanPost(sdk())
    assert lean.direct  # the SDK's default client is plain: its requests skip `AsyncClient.send`
    theirs, ours = await seen_by(SdkPost(sdk())), await seen_by(lean)
    assert ours == theirs
    assert ours[:4] == [
        ("/v1/chat/completions", None),
        ("/v1/moved", None),
        ("/v1/chat/completions", "affinity=a1"),
        ("/v1/moved", "affinity=a1"),
    ]


def test_only_plain_clients_skip_the_sdk_s_post():
    assert is_plain(Endpoint(BASE, "k", 60, 10).build()) and isinstance(poster_for(sdk()), LeanPost)
    azure = openai.AsyncAzureOpenAI(api_key="k", azure_endpoint="https://x.openai.azure.com", api_version="2024-06-01")
    assert not is_plain(azure) and isinstance(poster_for(azure), SdkPost)  # the URL is rewritten per deployment

    class Mine(openai.AsyncOpenAI):
        pass

    assert isinstance(poster_for(Mine(api_key="k", base_url=BASE)), SdkPost)
    assert isinstance(poster_for(sdk(default_query={"api-version": "1"})), SdkPost)
    client = sdk()
    assert poster_for(client) is poster_for(client)  # headers built once per client, for every agent on it


SERVER = r"""
import json
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

OK = {"choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "hello"}}]}

def error(status, message, code=None):
    return status, "application/json", json.dumps({"error": {"message": message, "type": "x", "code": code}})

ANSWERS = {
    "ok": (200, "application/json", json.dumps(OK)),
    "bad": error(400, "bad temperature"),
    "long": error(400, "This model's maximum context length is 8 tokens.", "context_length_exceeded"),
    "key": error(401, "Incorrect API key provided"),
    "slow": error(429, "Rate limit reached"),
    "down": error(500, "The server had an error"),
    "html": (200, "text/html", "<html><body>502 Bad Gateway</body></html>"),
    "none": (200, "application/json", json.dumps({"choices": []})),
}

class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["content-length"])))
        status, kind, text = ANSWERS[body["model"]]
        data = text.encode()
        self.send_response(status)
        self.send_header("content-type", kind)
        self.send_header("content-length", str(len(data)))
        self.send_header("retry-after", "0")
        self.send_header("x-authorization", self.headers.get("authorization", ""))
        self.send_header("x-peer-port", str(self.client_address[1]))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass

ThreadingHTTPServer.request_queue_size = 256  # calls at once: the default backlog of 5 would refuse them
server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


@pytest.fixture(scope="module")
def scripted_server():
    """A real OpenAI-compatible server in another process; the request's `model` picks the answer."""
    process = subprocess.Popen([sys.executable, "-c", SERVER], stdout=subprocess.PIPE, text=True)
    try:
        yield f"http://127.0.0.1:{process.stdout.readline().strip()}/v1"
    finally:
        process.kill()
        process.wait()


@pytest.mark.parametrize(
    "model, error, match, attempts",
    [
        ("bad", ModelRequestRejected, r"HTTP 400\): Error code: 400", 1),
        ("long", ContextLengthExceeded, "maximum context length", 1),
        ("key", ModelRequestRejected, r"HTTP 401\).*Incorrect API key", 1),
        ("slow", ModelUnavailable, "failed 2 times; last: HTTP 429", 2),
        ("down", ModelUnavailable, "failed 2 times; last: HTTP 500", 2),
        ("html", ModelBadResponse, "no usable response .* in 2 attempts; last: .*HTML page", 2),
        ("none", ModelBadResponse, "in 2 attempts; last: the response has no choices", 2),
    ],
)
def test_over_real_http_each_failure_ends_in_its_typed_error(scripted_server, model, error, match, attempts):
    sleeps: list[float] = []

    async def no_sleep(seconds: float) -> None:
        sleeps.append(seconds)

    async def call() -> None:
        client = OpenAIModelClient.from_spec(
            ModelSpec(name=model), {"OPENAI_BASE_URL": scripted_server}, max_attempts=2, sleep=no_sleep
        )
        assert isinstance(poster_for(client.client), LeanPost)  # an endpoint's client takes the lean path
        with pytest.raises(error, match=match):
            await client.complete(ModelRequest(model, [{"role": "user", "content": "hi"}], [], 0.5, 10))

    asyncio.run(call())
    assert len(sleeps) == attempts - 1  # the retryable ones were retried, the others not


def test_over_real_http_an_answer_comes_back_and_an_unreachable_server_is_typed(scripted_server):
    async def call(url: str) -> str | None:
        client = OpenAIModelClient.from_spec(ModelSpec(name="ok"), {"OPENAI_BASE_URL": url}, max_attempts=1)
        return (await client.complete(ModelRequest("ok", [{"role": "user", "content": "hi"}], [], 0.5, 10))).content

    assert asyncio.run(call(scripted_server)) == "hello"
    with pytest.raises(ModelUnavailable, match="unreachable after 1 attempt"):
        asyncio.run(call("http://127.0.0.1:9/v1"))  # the discard port: nothing listens


def test_the_step_body_and_its_tool_call_survive_the_lean_path(scripted_openai):
    scripted_openai.add(tool_call_body("send_message", {"message": "hi"}))
    response = asyncio.run(
        scripted_openai.client().complete(ModelRequest("m", [{"role": "user", "content": "x"}], [], 0.5, 10))
    )
    assert response.tool_calls[0].name == "send_message"
    assert scripted_openai.headers[0]["x-stainless-retry-count"] == "0"


def test_the_lean_post_spreads_concurrent_calls_over_pools_and_keeps_one_warm_connection(scripted_server):
    """Calls at once go to the least busy of up to SHARDS pools (with the SDK's settings and headers), each on one
    keep-alive connection; calls one at a time all reuse the first pool's connection (spread in turn, a rare
    caller's connection would have expired by its next turn). A client on a transport of its own keeps its pool."""
    body = json.dumps({"model": "ok", "messages": []}).encode()
    poster = LeanPost(Endpoint(scripted_server, "sk-shard", 60, 10).build())

    async def calls() -> tuple[list[httpx.Response], list[httpx.Response], list[httpx.Response]]:
        one_by_one = [await poster.post(body) for _ in range(5)]
        at_once = await asyncio.gather(*(poster.post(body) for _ in range(3 * SHARDS)))
        after = [await poster.post(body) for _ in range(5)]
        return one_by_one, list(at_once), after

    one_by_one, at_once, after = asyncio.run(calls())
    ports = lambda responses: {r.headers["x-peer-port"] for r in responses}  # noqa: E731
    assert len(ports(one_by_one)) == 1 and ports(after) == ports(one_by_one)  # the first pool's connection
    assert len(ports(at_once)) >= SHARDS  # each pool opened connections of its own
    assert sum(http is not None for http in poster._http) == SHARDS and poster._in_flight == [0] * SHARDS
    assert {r.headers["x-authorization"] for r in [*one_by_one, *at_once]} == {"Bearer sk-shard"}
    own = httpx.AsyncClient(transport=httpx.MockTransport(lambda request: httpx.Response(200)))
    assert plain_transport(own) is None and LeanPost(sdk(http_client=own))._http == [own]


def test_a_client_and_its_poster_are_freed_with_its_event_loop():
    """The poster refers to its client: were it kept in a table keyed by the client, neither (nor the client's pools
    and their loop) would ever be freed. Each `asyncio.run` here makes a loop, a shared client and its poster."""
    clients: list[weakref.ref] = []
    endpoint = Endpoint(BASE, "sk-freed", 60, 10)

    async def post_once() -> None:
        client = shared_client(endpoint)
        assert isinstance(poster_for(client), LeanPost)
        clients.append(weakref.ref(client))

    for _ in range(3):
        asyncio.run(post_once())
    asyncio.run(asyncio.sleep(0))  # a new loop drops the closed loops' clients (`model_pool.shared_client`)
    gc.collect()
    assert [ref() for ref in clients] == [None, None, None]
