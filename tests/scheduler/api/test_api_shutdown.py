"""Requests cut by the daemon's stop (issue 34, item 8): a sync message or a stream still waiting for its turn when the
daemon stops answers a clean JSON error (503 `daemon_stopping`, naming the run, which is stored and pending again),
never a bare 500; a turn that ends within the grace period answers with its reply as before."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from pagemind.runtime.process.settings import Settings
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.doubles import FunctionModel, by_purpose
from pagemind.scheduler.api.app import create_app
from pagemind.scheduler.catalog import AgentCatalog
from pagemind.scheduler.daemon import Daemon, DaemonConfig
from pagemind.scheduler.queue.inbox import Inbox
from tests.scheduler.api.test_api import TEMPLATE, parse_sse
from tests.support.openai_stub import answer


@pytest.fixture
async def stopping(tmp_path, sqlite_url):
    """(client, daemon, started, release): a daemon whose model waits on `release` in any turn whose user said
    "slow" (setting `started` first), and the API over it; the test stops the daemon itself."""
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "companion.yaml").write_text(TEMPLATE)
    started, release = asyncio.Event(), asyncio.Event()

    async def respond(request):
        if any("slow" in str(m.get("content")) for m in request.messages if m["role"] == "user"):
            started.set()
            await release.wait()
        return answer({"messages": request.messages})

    daemon = Daemon(
        AgentCatalog(folder, StateStore.open(sqlite_url)),
        Settings(home=tmp_path / "home", database_url=sqlite_url),
        model=FunctionModel(by_purpose(respond)),
        config=DaemonConfig(concurrency=2, poll_s=0.05),
    )
    await daemon.start()
    app = create_app(daemon, None, max_body=4096)
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
        assert (await client.post("/v1/agents", json={"template": "companion", "name": "u1"})).status_code == 201
        yield client, daemon, started, release
    await daemon.stop(1)  # a no-op once the test stopped it


def pending_in_store(sqlite_url: str, run_id: str) -> str | None:
    item = Inbox(StateStore.open(sqlite_url).engine).get(run_id)
    return None if item is None else item.state


async def test_a_sync_message_cut_by_the_stop_answers_503_and_its_run_stays_pending(stopping, sqlite_url):
    client, daemon, started, _ = stopping
    sent = asyncio.ensure_future(client.post("/v1/agents/u1/messages", json={"content": "slow", "timeout_s": 60}))
    await started.wait()
    await daemon.stop(0.05)  # the turn outlives the grace period: cancelled, its item given back
    answer_ = await sent
    assert answer_.status_code == 503 and answer_.headers["content-type"] == "application/json"
    error = answer_.json()["error"]
    assert error["code"] == "daemon_stopping" and "stored and pending" in error["message"]
    run_id = answer_.headers["location"].rsplit("/", 1)[-1]
    assert run_id in error["message"] and answer_.headers["retry-after"]
    assert pending_in_store(sqlite_url, run_id) == "pending"  # the next daemon runs it: nothing to send again


async def test_a_stream_cut_by_the_stop_ends_with_daemon_stopping_and_the_pending_run(stopping, sqlite_url):
    client, daemon, started, _ = stopping
    sent = asyncio.ensure_future(
        client.post("/v1/agents/u1/messages/stream", json={"content": "slow", "timeout_s": 60})
    )
    await started.wait()
    await daemon.stop(0.05)
    answer_ = await sent
    events = parse_sse(answer_.text)
    assert answer_.status_code == 200 and [name for name, _ in events[-2:]] == ["error", "done"]
    assert events[-2][1]["code"] == "daemon_stopping"
    run_id = events[-1][1]["run_id"]
    assert events[0] == ("accepted", events[0][1]) and events[0][1]["run_id"] == run_id
    assert pending_in_store(sqlite_url, run_id) == "pending"


async def test_a_turn_that_ends_within_the_grace_period_answers_with_its_reply(stopping):
    client, daemon, started, release = stopping
    sent = asyncio.ensure_future(client.post("/v1/agents/u1/messages", json={"content": "slow", "timeout_s": 60}))
    await started.wait()
    stop = asyncio.ensure_future(daemon.stop(30))
    release.set()  # the turn ends while the daemon drains
    answer_ = await sent
    await stop
    assert answer_.status_code == 200 and answer_.json()["reply"] == "echo: slow"
