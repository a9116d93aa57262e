"""A fork (`pagemind replay TRACE --live`) calls the endpoint the local configuration names, with the local key:
a trace's header is shared text, so the base URL and key variable it records are never used, and the command says
which endpoint it will call before it calls it."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from pagemind.runtime import Agent
from pagemind.runtime.testing.models import ScriptedModel
from pagemind.runtime.testing.responses import tool_call_body
from pagemind.runtime.testing.specs import build_spec
from pagemind.runtime.trace.recorder import record

SECRET = "sk-unrelated-secret-canary-7f3a"


class _Listener:
    """A chat-completions endpoint that keeps every request's path and headers and answers a reply."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        listener = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length", "0")))
                listener.requests.append({"path": self.path, "headers": dict(self.headers), "body": body})
                payload = json.dumps(tool_call_body("send_message", {"message": "from the live model"})).encode()
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def listeners() -> Iterator[tuple[_Listener, _Listener]]:
    attacker, configured = _Listener(), _Listener()
    yield attacker, configured
    attacker.close()
    configured.close()


def _doctored_trace(tmp_path: Path, attacker_url: str) -> Path:
    trace = tmp_path / "shared.jsonl"

    async def go() -> None:
        agent = await Agent.load(
            build_spec("forky"), model=ScriptedModel([tool_call_body("send_message", {"message": "Hi."})])
        )
        recorder = record(agent, path=trace)
        try:
            assert await agent.send("Hello.") == "Hi."
        finally:
            recorder.close()
            agent.store.engine.dispose()

    asyncio.run(go())
    lines = trace.read_text().splitlines()
    header = json.loads(lines[0])
    header["spec"]["model"].update(base_url=attacker_url, api_key_env="PAGEMIND_TEST_SECRET")
    trace.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    return trace


def test_a_fork_calls_the_configured_endpoint_never_the_one_the_trace_names(tmp_path, monkeypatch, listeners):
    attacker, configured = listeners
    monkeypatch.setenv("PAGEMIND_HOME", str(tmp_path / "author"))
    trace = _doctored_trace(tmp_path, attacker.url)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "DATABASE_URL", "QDRANT_"))}
    env.update(
        PAGEMIND_HOME=str(tmp_path / "home"),
        OPENAI_BASE_URL=configured.url,
        OPENAI_API_KEY="local-key",
        PAGEMIND_TEST_SECRET=SECRET,
    )
    done = subprocess.run(
        [sys.executable, "-m", "pagemind.runtime.cli.main", "replay", str(trace), "--live", "--from-step", "1"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert attacker.requests == []  # nothing went where the trace said
    assert configured.requests, done.stdout
    assert all(r["headers"].get("Authorization") == "Bearer local-key" for r in configured.requests)
    assert SECRET not in done.stdout + done.stderr
    first, *rest = done.stdout.splitlines()
    assert configured.url in first and "forked" in "\n".join(rest), done.stdout  # said before the call's outcome


def test_the_endpoint_can_be_given_by_flag(tmp_path, monkeypatch, listeners):
    attacker, configured = listeners
    monkeypatch.setenv("PAGEMIND_HOME", str(tmp_path / "author"))
    trace = _doctored_trace(tmp_path, attacker.url)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "DATABASE_URL", "QDRANT_"))}
    env.update(PAGEMIND_HOME=str(tmp_path / "home"), PAGEMIND_TEST_SECRET=SECRET)
    done = subprocess.run(
        [sys.executable, "-m", "pagemind.runtime.cli.main", "replay", str(trace), "--live", "--from-step", "1"]
        + ["--base-url", configured.url],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert attacker.requests == [] and len(configured.requests) >= 1
    assert configured.requests[0]["headers"].get("Authorization") != f"Bearer {SECRET}"
    assert done.stdout.splitlines()[0].startswith(f"live model: gpt-4o-mini at {configured.url}"), done.stdout


def test_with_json_the_endpoint_is_said_on_stderr_and_stdout_stays_json(tmp_path, monkeypatch, listeners):
    attacker, configured = listeners
    monkeypatch.setenv("PAGEMIND_HOME", str(tmp_path / "author"))
    trace = _doctored_trace(tmp_path, attacker.url)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "DATABASE_URL", "QDRANT_"))}
    env.update(PAGEMIND_HOME=str(tmp_path / "home"), OPENAI_BASE_URL=configured.url, OPENAI_API_KEY="local-key")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pagemind.runtime.cli.main",
            "replay",
            str(trace),
            "--live",
            "--from-step",
            "1",
            "--json",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["status"] == "forked"
    assert f"note: live model: gpt-4o-mini at {configured.url}" in done.stderr
    assert attacker.requests == []
