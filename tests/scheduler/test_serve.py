"""`pagemind serve` as a user runs it: a real process on a free port in front of a scripted OpenAI-compatible
server (tests/support/openai_stub.py, another process); the API over TCP — the event stream read as it arrives — the
CLI's `send`, `agents --server` and `run` through the daemon, auth and binding, and SIGTERM → exit 0."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.support.daemon_support import wait_until

ROOT = Path(__file__).parents[2]
TEMPLATE = """
name: companion
template: true
model: {name: gpt-4o-mini, context_window: 8192, max_output_tokens: 256, request_timeout_s: 10}
system: You are a warm companion.
blocks:
  - {label: persona, value: "I am warm.", limit: 200}
  - {label: human, value: "", limit: 100}
"""


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def stub():
    """The scripted model endpoint: its base URL."""
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "support" / "openai_stub.py"), "--latency-ms", "5"],
        stdout=subprocess.PIPE,
        text=True,
    )
    port = int(process.stdout.readline().split()[-1])
    yield f"http://127.0.0.1:{port}/v1"
    process.terminate()
    process.wait(10)


@pytest.fixture
def environment(tmp_path, stub):
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "companion.yaml").write_text(TEMPLATE)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "DATABASE_URL", "QDRANT_", "PAGEMIND_"))}
    env.update(PAGEMIND_HOME=str(tmp_path / "home"), OPENAI_BASE_URL=stub, OPENAI_API_KEY="test-key")
    return folder, env


def pagemind(env: dict, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "pagemind.scheduler.cli", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def start_serve(folder: Path, env: dict, *extra: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "pagemind.scheduler.cli", "serve", str(folder), "--port", str(port), *extra],
        cwd=ROOT,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"

    def healthy() -> bool:
        if process.poll() is not None:
            pytest.fail(f"serve exited {process.returncode}: {process.stderr.read()}")
        try:
            return httpx.get(f"{url}/health", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    wait_until(healthy, "pagemind serve to answer /health")
    return process, url


def stop(process: subprocess.Popen) -> tuple[int, str]:
    process.send_signal(signal.SIGTERM)
    try:
        code = process.wait(60)
    except subprocess.TimeoutExpired:
        process.kill()
        pytest.fail("serve did not exit within 60 s of SIGTERM")
    return code, process.stderr.read()


def read_events(response: httpx.Response):
    """(event, data) pairs as the server sends them, read off the socket one line at a time."""
    event = None
    for line in response.iter_lines():
        if line.startswith("event: "):
            event = line.removeprefix("event: ")
        elif line.startswith("data: ") and event:
            yield event, json.loads(line.removeprefix("data: "))
            event = None


def test_serve_stream_send_run_and_sigterm(environment):
    folder, env = environment
    process, url = start_serve(folder, env)
    try:
        made = httpx.post(f"{url}/v1/agents", json={"template": "companion", "name": "companion-u123"})
        assert made.status_code == 201, made.text
        seen = []
        with httpx.stream(
            "POST", f"{url}/v1/agents/companion-u123/messages/stream", json={"content": "I got the job!"}, timeout=60
        ) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            for name, data in read_events(response):
                seen.append(name)
                if name == "accepted":
                    run_id = data["run_id"]
                if name == "reply":
                    assert data == {"text": "echo: I got the job!"}
        assert seen[0] == "accepted" and seen[-2:] == ["reply", "done"]
        assert {"step_start", "tool_call", "tool_result", "memory_edit", "step_end"} <= set(seen)
        assert httpx.get(f"{url}/v1/runs/{run_id}").json()["state"] == "done"

        sent = pagemind(env, "send", "companion-u123", "hello", "--server", url, "--key", "k1")
        assert sent.returncode == 0, sent.stderr
        assert sent.stdout.strip() == "echo: hello"
        listed = pagemind(env, "agents", "--server", url)
        assert listed.returncode == 0 and "companion-u123" in listed.stdout
        missing = pagemind(env, "send", "nobody", "hello", "--server", url)
        assert missing.returncode == 2 and "no agent is called 'nobody'" in missing.stderr

        # `run` against an agent the local daemon serves goes through it (and says so).
        through = pagemind(env, "run", "companion-u123", "-m", "via run")
        assert through.returncode == 0, through.stderr
        assert through.stdout.strip() == "echo: via run" and "through the daemon" in through.stderr
    finally:
        code, stderr = stop(process)
    assert code == 0, stderr
    assert "loopback only" in stderr  # said at start: no token, so no other machine may connect


def test_a_token_protects_the_api_over_tcp(environment):
    folder, env = environment
    env = {**env, "PAGEMIND_API_TOKEN": "s3cret"}
    process, url = start_serve(folder, env, "--host", "0.0.0.0")
    try:
        refused = httpx.get(f"{url}/v1/agents")
        assert refused.status_code == 401 and refused.json()["error"]["code"] == "unauthorized"
        assert httpx.get(f"{url}/v1/agents", headers={"authorization": "Bearer s3cret"}).status_code == 200
        listed = pagemind(env, "agents", "--server", url)  # the CLI sends $PAGEMIND_API_TOKEN
        assert listed.returncode == 0, listed.stderr
        no_token = pagemind({k: v for k, v in env.items() if k != "PAGEMIND_API_TOKEN"}, "agents", "--server", url)
        assert no_token.returncode == 2 and "401" in no_token.stderr
    finally:
        code, stderr = stop(process)
    assert code == 0, stderr


def test_without_a_token_only_loopback_may_be_bound(environment):
    folder, env = environment
    refused = pagemind(env, "serve", str(folder), "--host", "0.0.0.0", "--port", str(free_port()), timeout=60)
    assert refused.returncode == 2
    assert "without PAGEMIND_API_TOKEN" in refused.stderr


def test_the_reply_tokens_arrive_over_tcp_before_the_reply(environment, stub):
    folder, env = environment
    process, url = start_serve(folder, env)
    text = 'I got the job! Ça "marche" 😀'
    try:
        assert httpx.post(f"{url}/v1/agents", json={"template": "companion", "name": "u9"}).status_code == 201
        arrived = []
        with httpx.stream(
            "POST", f"{url}/v1/agents/u9/messages/stream", json={"content": text}, timeout=60
        ) as response:
            for name, data in read_events(response):  # in the order they come off the socket
                arrived.append((name, data))
        names = [name for name, _ in arrived]
        deltas = [data["text"] for name, data in arrived if name == "reply_delta"]
        assert len(deltas) > 5 and "reply_reset" not in names
        assert max(i for i, n in enumerate(names) if n == "reply_delta") < names.index("reply")
        assert "".join(deltas) == dict(arrived)["reply"]["text"] == f"echo: {text}"
        stats = httpx.get(stub.removesuffix("/v1") + "/stats").json()
        assert stats["streamed"] == 2  # both steps of the streamed turn; and a plain message does not stream:
        assert (
            httpx.post(f"{url}/v1/agents/u9/messages", json={"content": "hi"}, timeout=60).json()["reply"] == "echo: hi"
        )
        after = httpx.get(stub.removesuffix("/v1") + "/stats").json()
        assert (after["completions"], after["streamed"]) == (stats["completions"] + 2, 2)
    finally:
        code, stderr = stop(process)
    assert code == 0, stderr


WARM_CHILD = """
import sys
from pathlib import Path
from pagemind.runtime import tokens
from pagemind.runtime.state.store import StateStore
from pagemind.scheduler.api.serve import load_before_serving
from pagemind.scheduler.catalog import AgentCatalog

folder = Path(sys.argv[1])
catalog = AgentCatalog(folder, StateStore.open("sqlite:///" + str(folder / "state.db")))
assert "openai" not in sys.modules and "aiohttp" not in sys.modules and tokens.load_encoding.cache_info().currsize == 0
load_before_serving(catalog)
assert "aiohttp" in sys.modules  # PAGEMIND_HTTP_CLIENT=aiohttp, as `serve` sets by default
loaded = sorted(enc.name for enc in (tokens.load_encoding("cl100k_base"), tokens.load_encoding("o200k_base")))
print("openai" in sys.modules, "httpcore" in sys.modules, tokens.load_encoding.cache_info().hits, *loaded)
"""


def test_serve_loads_the_sdk_and_the_folders_encodings_before_its_first_turn(tmp_path):
    """`pagemind run` leaves the SDK and the encoding to the first turn (start-up time); `serve` loads both up
    front, for every encoding its folder's agents and templates count in (`load_before_serving`)."""
    (tmp_path / "a.yaml").write_text("name: a\nsystem: Hi.\nmodel: {name: gpt-4o-mini, encoding: cl100k_base}\n")
    (tmp_path / "b.yaml").write_text("name: b\nsystem: Hi.\ntemplate: true\nmodel: {name: gpt-4o-mini}\n")
    out = subprocess.run(
        [sys.executable, "-c", WARM_CHILD, str(tmp_path)],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PAGEMIND_HTTP_CLIENT": "aiohttp"},
    ).stdout
    # both encodings were already built: the two lookups after it were cache hits
    assert out.split() == ["True", "True", "2", "cl100k_base", "o200k_base"]


def test_serve_runs_its_event_loop_on_uvloop_and_other_commands_on_asyncio(monkeypatch):
    """`serve` carries its own loop (`api_serve.serving_loop`: uvloop where installed); the runtime's main runs
    a command on the loop its parser names, and any other command on asyncio's."""
    import asyncio

    from pagemind.runtime.cli import main as cli_main
    from pagemind.scheduler.api.serve import serving_loop
    from pagemind.scheduler.cli import add_parsers

    uvloop = pytest.importorskip("uvloop")
    loops: dict[str, type] = {}

    async def record(args, settings):
        loops[args.command] = type(asyncio.get_running_loop())
        return 0

    def extend_recording(sub):
        add_parsers(sub)
        for name in ("serve", "agents"):
            sub.choices[name].set_defaults(handler=record)

    monkeypatch.setattr(cli_main, "configure_logging", lambda: None)
    for argv in (["serve", "."], ["agents"]):
        assert cli_main.main(argv, extend=extend_recording) == 0
    assert issubclass(loops["serve"], uvloop.Loop)
    assert not issubclass(loops["agents"], uvloop.Loop)
    loop = serving_loop()
    try:
        assert isinstance(loop, uvloop.Loop)
    finally:
        loop.close()
