"""Requests cut by the daemon's stop (issue 34, item 8): a sync message or a stream still waiting for its turn when the
daemon stops answers a clean JSON error (503 `daemon_stopping`, naming the run, which is stored and pending again),
never a bare 500; a turn that ends within the grace period answers with its reply as before. Last, a real `pagemind
serve` stopped by SIGTERM while a sync request waits: JSON 503, exit 0, and no traceback in its output (uvicorn's
cancelled request was a plain-text 500 and two of them)."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading

import httpx
import pytest

from pagemind.runtime.process.settings import Settings
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.models import FunctionModel, by_purpose
from pagemind.scheduler.api.app import create_app
from pagemind.scheduler.catalog import AgentCatalog
from pagemind.scheduler.daemon import Daemon
from pagemind.scheduler.daemon_config import DaemonConfig
from pagemind.scheduler.queue.inbox import Inbox
from tests.scheduler.api.test_api import TEMPLATE, parse_sse
from tests.scheduler.test_serve import ROOT, start_serve, stop
from tests.scheduler.test_serve import TEMPLATE as SERVED_TEMPLATE
from tests.support.daemon_support import wait_until
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


@pytest.fixture
def slow_stub():
    """A model endpoint that takes 60 s to answer: the turn is still waiting when the daemon stops."""
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "support" / "openai_stub.py"), "--latency-ms", "60000"],
        stdout=subprocess.PIPE,
        text=True,
    )
    port = int(process.stdout.readline().split()[-1])
    yield f"http://127.0.0.1:{port}/v1"
    process.terminate()
    process.wait(10)


def test_a_real_serve_cut_by_sigterm_answers_json_503_and_logs_no_traceback(slow_stub, tmp_path):
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "companion.yaml").write_text(SERVED_TEMPLATE)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "DATABASE_URL", "QDRANT_", "PAGEMIND_"))}
    env.update(PAGEMIND_HOME=str(tmp_path / "home"), OPENAI_BASE_URL=slow_stub, OPENAI_API_KEY="test-key")
    process, url = start_serve(folder, env, "--grace", "0.5")
    answers: list[httpx.Response] = []
    try:
        assert httpx.post(f"{url}/v1/agents", json={"template": "companion", "name": "u1"}).status_code == 201
        waiting = threading.Thread(
            target=lambda: answers.append(
                httpx.post(f"{url}/v1/agents/u1/messages", json={"content": "hi", "timeout_s": 120}, timeout=120)
            )
        )
        waiting.start()
        wait_until(lambda: httpx.get(f"{url}/v1/agents/u1").json()["pending"] == 1, "the message in the inbox")
    finally:
        code, stderr = stop(process)
    waiting.join(60)
    assert code == 0, stderr
    assert "Traceback" not in stderr and "Exception in ASGI application" not in stderr, stderr
    (answer,) = answers
    assert answer.status_code == 503 and answer.headers["content-type"] == "application/json"
    assert answer.json()["error"]["code"] == "daemon_stopping"
    assert answer.headers["location"].startswith("/v1/runs/")
