"""The reply's tokens on the daemon's event stream: a daemon whose agents call a real `OpenAIModelClient` against a
provider mocked at the HTTP layer (respx; it answers as tests/support/openai_stub.py does, streamed when asked). A stream
subscriber makes the daemon ask for `stream: true`; a plain message does not; a provider stream cut mid-way shows
as a `reply_reset` and the retried call streams again. (Over TCP, with a real `pagemind serve`: tests/scheduler/test_serve.py.)
"""

from __future__ import annotations

import json

import httpx
import openai
import pytest
import respx

from pagemind.runtime.model.client import OpenAIModelClient
from pagemind.runtime.process.settings import Settings
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.endpoint import BASE_URL, TEST_API_KEY
from pagemind.runtime.testing.sse import sse_bytes, stream_chunks, streamed_response
from pagemind.scheduler.api.app import create_app
from pagemind.scheduler.catalog import AgentCatalog
from pagemind.scheduler.daemon import Daemon
from pagemind.scheduler.daemon_config import DaemonConfig
from tests.scheduler.api.test_api import TEMPLATE, create, parse_sse
from tests.support.openai_stub import answer


async def no_sleep(seconds: float) -> None:
    pass


class Provider:
    """The stub's answers over HTTP; streamed (2 characters a chunk, 3 bytes a read) when the request asks, and
    the first `cut` streamed replies broken off half-way."""

    def __init__(self, cut: int = 0):
        self.requests: list[dict] = []
        self.cut = cut

    def handle(self, request: httpx.Request) -> httpx.Response:
        body = json.loads(request.content)
        self.requests.append(body)
        reply = answer(body)
        if not body.get("stream"):
            return httpx.Response(200, json=reply)
        if self.cut and reply["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "send_message":
            self.cut -= 1
            whole = len(sse_bytes(stream_chunks(reply, 2)))
            return streamed_response(reply, size=2, cut=3, stop_after=whole * 3 // 4, broken=True)
        return streamed_response(reply, size=2, cut=3)


@pytest.fixture
async def daemon_with(tmp_path, sqlite_url):
    """A factory: (client, provider) for an API over a daemon whose model speaks HTTP to `Provider(cut)`."""
    made = []

    async def make(cut: int = 0):
        folder = tmp_path / "agents"
        folder.mkdir(exist_ok=True)
        (folder / "companion.yaml").write_text(TEMPLATE)
        provider = Provider(cut)
        router = respx.mock(base_url=BASE_URL, assert_all_called=False)
        router.post("/chat/completions").mock(side_effect=provider.handle)
        router.start()
        sdk = openai.AsyncOpenAI(api_key=TEST_API_KEY, base_url=BASE_URL, max_retries=0)
        model = OpenAIModelClient(sdk, max_attempts=3, sleep=no_sleep)
        daemon = Daemon(
            AgentCatalog(folder, StateStore.open(sqlite_url)),
            Settings(home=tmp_path / "home", database_url=sqlite_url),
            model=model,
            config=DaemonConfig(concurrency=2, poll_s=0.05),
        )
        await daemon.start()
        client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=create_app(daemon, None, max_body=4096)), base_url="http://test"
        )
        made.append((router, daemon, client))
        return client, provider

    yield make
    for router, daemon, client in made:
        await client.aclose()
        await daemon.stop(5)
        router.stop()


def deltas_and_reply(events: list[tuple[str, dict]]) -> tuple[str, str]:
    """What a client building the reply from `reply_delta`s holds at the `reply` event, and that event's text."""
    held = ""
    for name, data in events:
        if name == "reply_delta":
            held += data["text"]
        elif name == "reply_reset":
            held = ""
        elif name == "reply":
            return held, data["text"]
    raise AssertionError("no reply event")


async def test_a_streamed_message_carries_the_reply_tokens_before_the_reply(daemon_with):
    client, provider = await daemon_with()
    await create(client)
    text = 'Ça "va"? 😀\nyes'
    response = await client.post("/v1/agents/companion-u1/messages/stream", json={"content": text})
    events = parse_sse(response.text)
    names = [name for name, _ in events]
    assert names[:3] == ["accepted", "turn_start", "step_start"] and names[-2:] == ["reply", "done"]
    first_delta = names.index("reply_delta")
    assert names[first_delta - 1] == "step_start"  # the second step's: the pieces come while the model writes
    assert names[first_delta:].index("model_done") > names[first_delta:].index("reply_delta")
    assert "reply_reset" not in names
    held, reply = deltas_and_reply(events)
    assert held == reply == f"echo: {text}"
    assert all(data["source"] == "send_message" and data["step"] == 2 for name, data in events if name == "reply_delta")
    assert [r.get("stream") for r in provider.requests] == [True, True]
    assert all(r["stream_options"] == {"include_usage": True} for r in provider.requests)


async def test_a_message_nobody_streams_makes_plain_requests(daemon_with):
    client, provider = await daemon_with()
    await create(client)
    done = await client.post("/v1/agents/companion-u1/messages", json={"content": "hi", "mode": "sync"})
    assert done.json()["reply"] == "echo: hi"
    assert len(provider.requests) == 2 and not any("stream" in r for r in provider.requests)


async def test_a_provider_stream_cut_mid_way_is_reset_and_streamed_again(daemon_with):
    client, provider = await daemon_with(cut=1)
    await create(client)
    response = await client.post("/v1/agents/companion-u1/messages/stream", json={"content": "a long enough message"})
    events = parse_sse(response.text)
    names = [name for name, _ in events]
    reset = names.index("reply_reset")
    assert "reply_delta" in names[:reset] and "reply_delta" in names[reset:]
    assert "partial reply is discarded" in dict(events)["reply_reset"]["reason"]
    held, reply = deltas_and_reply(events)
    assert held == reply == "echo: a long enough message"
    assert len(provider.requests) == 3  # the cut call was made again, whole
