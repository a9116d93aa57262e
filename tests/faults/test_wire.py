"""The model call over a real socket on each HTTP client the runtime posts with (`real_client`: httpx, and aiohttp,
the daemon's): the same request on the wire, the SDK's typed errors and retries, bodies compressed, cut or
streamed, redirects and cookies. respx cannot see aiohttp's requests, so these run against a local server."""

from __future__ import annotations

import gzip
import json

import openai
import pytest

from pagemind.runtime.model.client import (
    ContextLengthExceeded,
    ModelBadResponse,
    ModelRequest,
    ModelUnavailable,
    OpenAIModelClient,
)
from pagemind.runtime.model.posters import close_poster
from pagemind.runtime.model.transports import AiohttpPost, LeanPost, environment_proxy
from pagemind.runtime.testing.responses import reply_body
from tests.faults.server import Cut, FaultServer, Reply
from tests.runtime.model.test_model_stream import Watcher, sink

REQUEST = ModelRequest("m", [{"role": "user", "content": "héllo"}], [], 0.5, 100)
SHARED = (
    "authorization",
    "content-type",
    "accept",
    "user-agent",
    "x-stainless-lang",
    "x-stainless-retry-count",
    "x-stainless-read-timeout",
)


def error(status: int, message: str, code: str | None = None) -> Reply:
    return Reply({"error": {"message": message, "type": "invalid_request_error", "code": code}}, status)


async def test_both_clients_send_the_same_body_and_the_sdk_s_headers(fault_server):
    fault_server.add(Reply(reply_body("one")), Reply(reply_body("two")))
    sdk = openai.AsyncOpenAI(api_key="sk-wire", base_url=fault_server.url, max_retries=0)
    replies = []
    try:
        for poster in (LeanPost(sdk), AiohttpPost(sdk)):
            replies.append((await poster.post(REQUEST.encoded())).json()["choices"][0]["message"]["content"])
            await poster.aclose()
    finally:
        await sdk.close()
    assert replies == ["one", "two"]
    first, second = fault_server.headers
    assert {k: first.get(k) for k in SHARED} == {k: second.get(k) for k in SHARED}
    assert first["authorization"] == "Bearer sk-wire"
    assert fault_server.requests[0] == fault_server.requests[1] == json.loads(REQUEST.encoded())


async def test_a_status_error_is_the_sdk_s_and_context_overflow_is_never_retried(fault_server, real_client):
    fault_server.add(error(400, "This model's maximum context length is 8 tokens.", "context_length_exceeded"))
    with pytest.raises(ContextLengthExceeded):
        await real_client(fault_server.url, 5, max_attempts=3).complete(REQUEST)
    assert len(fault_server.requests) == 1


async def test_429_waits_what_the_server_asks_and_5xx_html_is_retried(fault_server, real_client):
    slept: list[float] = []
    fault_server.add(
        Reply({"error": {"message": "slow down"}}, 429, {"retry-after": "7"}),
        Reply(b"<html><body>Bad gateway</body></html>", 502, {"content-type": "text/html"}),
        Reply(reply_body("after all")),
    )
    client = real_client(fault_server.url, 5, max_attempts=3)

    async def record(seconds: float) -> None:
        slept.append(seconds)

    client.sleep = record
    assert (await client.complete(REQUEST)).content == "after all"
    assert slept[0] == 7.0 and len(fault_server.requests) == 3


async def test_an_html_page_with_status_200_is_a_clear_error_after_the_attempts(fault_server, real_client):
    fault_server.add(*[Reply(b"<!doctype html><title>Login</title>", 200, {"content-type": "text/html"})] * 2)
    with pytest.raises(ModelBadResponse) as caught:
        await real_client(fault_server.url, 5).complete(REQUEST)
    assert "\n" not in str(caught.value) and len(fault_server.requests) == 2


async def test_a_gzip_body_is_decoded(fault_server, real_client):
    fault_server.add(Reply(gzip.compress(json.dumps(reply_body("packed")).encode()), 200, {"content-encoding": "gzip"}))
    assert (await real_client(fault_server.url, 5).complete(REQUEST)).content == "packed"


async def test_a_body_cut_off_is_retried(fault_server, real_client):
    fault_server.add(Cut(), Reply(reply_body("whole")))
    assert (await real_client(fault_server.url, 5).complete(REQUEST)).content == "whole"
    assert len(fault_server.requests) == 2


async def test_a_streamed_reply_arrives_in_pieces_and_is_assembled(fault_server, real_client):
    chunks = [{"choices": [{"index": 0, "delta": {"role": "assistant", "content": text}}]} for text in ("Hel", "lo")]
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
    body = b"".join(b"data: " + json.dumps(chunk).encode() + b"\n\n" for chunk in chunks) + b"data: [DONE]\n\n"
    fault_server.add(Reply(body, 200, {"content-type": "text/event-stream"}))
    watcher = Watcher()
    response = await real_client(fault_server.url, 5).stream(REQUEST, sink(watcher))
    assert response.content == "Hello" and watcher.held() == "Hello"
    assert fault_server.requests[0]["stream"] is True


async def test_a_redirect_is_followed_and_a_cookie_is_sent_back(fault_server, real_client):
    moved = fault_server.url.removesuffix("/v1") + "/moved/chat/completions"
    fault_server.add(
        Reply(b"", 307, {"location": moved}),
        Reply(reply_body("here"), 200, {"set-cookie": "affinity=node-7; Path=/"}),
        Reply(reply_body("again")),
    )
    client = real_client(fault_server.url, 5)
    assert (await client.complete(REQUEST)).content == "here"
    assert (await client.complete(REQUEST)).content == "again"
    assert fault_server.paths == ["/v1/chat/completions", "/moved/chat/completions", "/v1/chat/completions"]
    assert "affinity=node-7" in fault_server.headers[2].get("cookie", "")


async def test_no_server_is_a_connection_error_retried_then_unavailable(real_client):
    with FaultServer() as server:
        url = server.url  # the port is free again once the server has stopped
    with pytest.raises(ModelUnavailable, match="unreachable after 2 attempts: APIConnectionError"):
        await real_client(url, 5).complete(REQUEST)


async def test_the_aiohttp_session_is_made_at_the_first_call_and_closed_with_the_poster(fault_server):
    fault_server.add(Reply(reply_body("ok")))
    sdk = openai.AsyncOpenAI(api_key="k", base_url=fault_server.url, max_retries=0)
    client = OpenAIModelClient(sdk, http="aiohttp")
    assert (await client.complete(REQUEST)).content == "ok"
    poster = sdk._pagemind_poster
    assert isinstance(poster, AiohttpPost) and not poster._session.closed
    session = poster._session
    await close_poster(sdk)
    assert session.closed and poster._session is None
    await sdk.close()


def test_the_proxy_comes_from_the_environment_as_httpx_reads_it(monkeypatch):
    import httpx

    for name in (
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "NO_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
        "no_proxy",
    ):
        monkeypatch.delenv(name, raising=False)
    assert environment_proxy(httpx.URL("https://api.example.com/v1")) is None
    monkeypatch.setenv("HTTPS_PROXY", "http://proxy.internal:3128")
    monkeypatch.setenv("NO_PROXY", "localhost,.corp")
    assert environment_proxy(httpx.URL("https://api.example.com/v1")) == "http://proxy.internal:3128"
    assert environment_proxy(httpx.URL("https://llm.corp/v1")) is None
    assert environment_proxy(httpx.URL("http://api.example.com/v1")) is None  # no HTTP_PROXY


def test_the_http_client_comes_from_the_environment_and_a_bad_name_is_a_clear_error():
    from pagemind.runtime.process.settings import SettingsError
    from pagemind.runtime.spec.agent import ModelSpec

    env = {"OPENAI_BASE_URL": "http://x/v1"}
    assert OpenAIModelClient.from_spec(ModelSpec(name="m"), env).http == "httpx"
    assert (
        OpenAIModelClient.from_spec(ModelSpec(name="m"), {**env, "PAGEMIND_HTTP_CLIENT": "aiohttp"}).http == "aiohttp"
    )
    with pytest.raises(SettingsError, match="PAGEMIND_HTTP_CLIENT='curl' names no HTTP client: use one of httpx"):
        OpenAIModelClient.from_spec(ModelSpec(name="m"), {**env, "PAGEMIND_HTTP_CLIENT": "curl"})
