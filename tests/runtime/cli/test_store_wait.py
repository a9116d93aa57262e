"""Two commands at once, and commands beside a daemon, with the shipped agents (which have archival tools), from
the installed wheel in a folder outside the repository (issue #33, item 4):

- a second `pagemind run` waits for the archival store another run holds, as it waits for the turn lock, and
  answers once the first is done; with too short a `--wait` it exits 3 (busy), with nothing stored;
- beside a daemon that holds the store, `chat`, `run --trace`, `run --reset-memory`, `memory search` and
  `memory forget` exit 3 (busy) at once and say which of the daemon's routes does what they asked.
"""

from __future__ import annotations

import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.daemon_support import wait_until
from tests.support.installed import clean_env, pagemind_command
from tests.support.model_server import model_server, reply


class _Gate:
    """What the model server shares with the test: whether a request arrived, and whether it may answer."""

    def __init__(self) -> None:
        self.arrived = threading.Event()
        self.open = threading.Event()


@pytest.fixture
def gated_model() -> Iterator[tuple[str, _Gate]]:
    """A model that answers each request with a plain reply once the test opens the gate."""
    gate = _Gate()

    def answer(body: dict[str, Any]) -> dict[str, Any]:
        gate.arrived.set()
        gate.open.wait(120)
        return reply("Noted.")

    with model_server(answer) as url:
        yield url, gate
        gate.open.set()


@pytest.fixture
def user(venv: Path, tmp_path: Path, gated_model) -> dict[str, Any]:
    """A user's folder with the shipped examples (`pagemind init`) and the environment their commands run in."""
    url, gate = gated_model
    work = tmp_path / "work"
    work.mkdir()
    env = clean_env(PAGEMIND_HOME=str(tmp_path / "home"), OPENAI_BASE_URL=url, OPENAI_API_KEY="test-key")
    made = subprocess.run([pagemind_command(venv), "init"], cwd=work, env=env, capture_output=True, text=True)
    assert made.returncode == 0, made.stderr
    return {"work": work, "env": env, "gate": gate, "command": pagemind_command(venv)}


def _start(user: dict[str, Any], *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [user["command"], *args],
        cwd=user["work"],
        env=user["env"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _run(user: dict[str, Any], *args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [user["command"], *args], cwd=user["work"], env=user["env"], input=stdin, capture_output=True, text=True
    )


def _stored_user_messages(user: dict[str, Any], agent: str) -> list[str]:
    """The user messages recall memory holds, newest first (`memory search --in recall`, which opens no vector
    store)."""
    found = _run(user, "memory", "search", agent, "dinner", "--in", "recall", "--limit", "20")
    assert found.returncode == 0, found.stderr
    return [line for line in found.stdout.splitlines() if " user " in line]


@pytest.mark.parametrize("agent", ["companion", "assistant"])
def test_a_second_run_waits_for_the_store_the_first_holds(user, agent):
    first = _start(user, "run", f"agents/{agent}.yaml", "-m", "First: dinner with Mei on Friday.")
    assert user["gate"].arrived.wait(120), "the first run never called the model"
    second = _start(user, "run", f"agents/{agent}.yaml", "-m", "Second: dinner with Leo on Sunday.", "--wait", "120")
    assert second.stderr is not None
    note = second.stderr.readline()  # blocks until the second run says it waits
    assert "waiting up to 120 s for the archival store" in note
    user["gate"].open.set()  # the first run's model answers: it finishes and lets the store go
    assert first.wait(120) == 0, first.stderr.read() if first.stderr else ""
    out, err = second.communicate(timeout=120)
    assert second.returncode == 0, note + err
    assert "Noted." in out
    stored = _stored_user_messages(user, agent)
    assert len(stored) == 2 and any("Leo" in line for line in stored) and any("Mei" in line for line in stored)


def test_too_short_a_wait_is_busy_with_nothing_stored(user):
    first = _start(user, "run", "agents/companion.yaml", "-m", "First: dinner with Mei on Friday.")
    assert user["gate"].arrived.wait(120), "the first run never called the model"
    second = _run(user, "run", "agents/companion.yaml", "-m", "Second: dinner with Leo on Sunday.", "--wait", "0.5")
    user["gate"].open.set()
    assert first.wait(120) == 0
    assert second.returncode == 3, second.stderr
    assert "Waited 0.5 s (--wait SECONDS). Nothing was stored." in second.stderr
    assert "Traceback" not in second.stderr
    stored = _stored_user_messages(user, "companion")
    assert len(stored) == 1 and "Mei" in stored[0]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
def daemon(user) -> Iterator[str]:
    """`pagemind serve agents` beside the user's commands, once it has answered a turn of the companion (so it
    holds the archival store)."""
    port = _free_port()
    process = _start(user, "serve", "agents", "--port", str(port))
    url = f"http://127.0.0.1:{port}"

    def healthy() -> bool:
        if process.poll() is not None:
            pytest.fail(f"serve exited {process.returncode}")
        try:
            return httpx.get(f"{url}/v1/health", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    wait_until(healthy, "`pagemind serve` to answer /v1/health")
    user["gate"].open.set()
    sent = httpx.post(f"{url}/v1/agents/companion/messages", json={"content": "Hello, dinner soon?"}, timeout=120)
    assert sent.status_code == 200, sent.text
    yield url
    process.terminate()
    process.communicate(timeout=60)


@pytest.mark.parametrize(
    ("args", "route"),
    [
        (["chat", "agents/companion.yaml"], "pagemind send companion TEXT --server {url}"),
        (["run", "agents/companion.yaml", "-m", "hi", "--trace", "t.jsonl"], "pagemind trace ls companion"),
        (["run", "agents/companion.yaml", "-m", "hi", "--reset-memory"], "DELETE {url}/v1/agents/companion"),
        (["memory", "search", "companion", "dinner"], "GET {url}/v1/agents/companion/memory/archival/search?q=dinner"),
    ],
    ids=["chat", "run-trace", "run-reset", "memory-search"],
)
def test_beside_a_daemon_a_command_says_which_route_does_it(user, daemon, args, route):
    done = _run(user, *args, "--wait", "60") if args[0] != "chat" else _run(user, *args, "--wait", "60", stdin="hi\n")
    assert done.returncode == 3, done.stdout + done.stderr
    assert f"the daemon at {daemon} serves this database" in done.stderr
    assert route.format(url=daemon) in done.stderr
    assert "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_beside_a_daemon_run_goes_through_it(user, daemon):
    done = _run(user, "run", "agents/companion.yaml", "-m", "And dessert?")
    assert done.returncode == 0, done.stderr
    assert f"sending through the daemon at {daemon}" in done.stderr
    assert "Noted." in done.stdout
