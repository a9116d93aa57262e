"""A real `pagemind serve` stopped while a sync request waits for a turn the model has not answered (issue 34, item
8): the client gets a clean JSON 503 `daemon_stopping` naming its run, the process exits 0, and its output has no
traceback (uvicorn's cancelled request was a plain-text 500 and two of them)."""

from __future__ import annotations

import subprocess
import sys
import threading

import httpx
import pytest

from tests.scheduler.test_serve import ROOT, environment, start_serve, stop  # noqa: F401 (a fixture)
from tests.support.daemon_support import wait_until


@pytest.fixture
def stub():
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


def test_a_sync_request_cut_by_sigterm_answers_json_503_and_nothing_is_logged_as_a_traceback(environment):  # noqa: F811
    folder, env = environment
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
