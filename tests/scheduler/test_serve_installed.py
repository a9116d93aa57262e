"""A user's first hour with `pagemind serve` (issue #33), as they meet it: the installed console script started
from a folder outside the repository, on a free port, read over TCP with httpx.

- a folder with broken agent files says so at start, one line per file on stderr, serves the good agents, and
  answers a message to a broken agent's name with why it is not served (503 `agent_unavailable`) until the file
  is fixed;
- the probes answer under `/v1` as at the root, without a key, and keep what is wrong with the files behind it;
- the docs page and the OpenAPI document it loads open without a key and declare the bearer scheme, while the
  API still needs the key.
"""

from __future__ import annotations

import re
import signal
import socket
import subprocess
from pathlib import Path

import httpx
import pytest

from tests.support.daemon_support import wait_until
from tests.support.installed import clean_env, pagemind_command

GOOD = "name: alice\nmodel: {name: gpt-4o-mini, context_window: 8192}\nsystem: Reply with send_message.\n"
# line 4: a custom tool whose module is not there (the most common first-hour mistake after a typo)
BROKEN_TOOL = (
    "name: helper\nmodel: {name: gpt-4o-mini}\nsystem: Reply with send_message.\n"
    "tools: [send_message, nosuch_pkg.tools:lookup]\n"
)
SYNTAX = "name: typo\nmodel: {name: gpt-4o-mini\nsystem: Hi.\n"  # the flow mapping never closes: line 3
TWO_PROBLEMS = "name: worse\nmodel: {name: gpt-4o-mini, context_window: -3}\nsystem: Hi.\nblockz: 3\n"
TOKEN = "s3cret"
KEY = {"authorization": f"Bearer {TOKEN}"}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _start(venv: Path, cwd: Path, **env: str) -> tuple[subprocess.Popen, str]:
    """`pagemind serve agents` from `cwd`, once it answers; (process, base URL)."""
    port = _free_port()
    environment = clean_env(
        PAGEMIND_HOME=str(cwd / "home"), OPENAI_API_KEY="test-key", OPENAI_BASE_URL="http://127.0.0.1:9/v1", **env
    )
    process = subprocess.Popen(
        [pagemind_command(venv), "serve", "agents", "--port", str(port)],
        cwd=cwd,
        env=environment,
        stderr=subprocess.PIPE,
        text=True,
    )
    url = f"http://127.0.0.1:{port}"

    def healthy() -> bool:
        if process.poll() is not None:
            pytest.fail(f"serve exited {process.returncode}: {process.stderr.read()[-3000:]}")
        try:
            return httpx.get(f"{url}/v1/health", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    wait_until(healthy, "the installed `pagemind serve` to answer /v1/health")
    return process, url


def _stop(process: subprocess.Popen) -> str:
    """SIGTERM, the exit status checked; what the process wrote on stderr."""
    process.send_signal(signal.SIGTERM)
    try:
        _, stderr = process.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        process.kill()
        pytest.fail("serve did not exit within 60 s of SIGTERM")
    assert process.returncode == 0, stderr[-3000:]
    return stderr


def _error(response: httpx.Response, status: int, code: str) -> str:
    assert response.status_code == status, response.text
    body = response.json()["error"]
    assert body["code"] == code
    return str(body["message"])


def _folder(root: Path, **files: str) -> Path:
    folder = root / "agents"
    folder.mkdir()
    for stem, text in files.items():
        (folder / f"{stem}.yaml").write_text(text)
    return folder


def test_broken_agent_files_are_reported_at_start_and_answer_why_they_are_not_served(venv, tmp_path):
    folder = _folder(tmp_path, alice=GOOD, helper=BROKEN_TOOL, typo=SYNTAX, worse=TWO_PROBLEMS)
    process, url = _start(venv, tmp_path)
    try:
        assert [a["name"] for a in httpx.get(f"{url}/v1/agents", timeout=10).json()["agents"]] == ["alice"]
        assert httpx.get(f"{url}/v1/agents/alice/memory", timeout=10).status_code == 200  # the good one is served

        message = {"content": "hi", "mode": "async"}
        why = _error(httpx.post(f"{url}/v1/agents/helper/messages", json=message, timeout=10), 503, "agent_unavailable")
        assert "agent 'helper' failed to load" in why
        assert "agents/helper.yaml: line 4 tools[1]: cannot import module 'nosuch_pkg.tools'" in why
        # a file that is not even YAML is known by its file name
        why = _error(httpx.post(f"{url}/v1/agents/typo/messages", json=message, timeout=10), 503, "agent_unavailable")
        assert "agents/typo.yaml: line 3 YAML syntax" in why
        made = httpx.post(f"{url}/v1/agents", json={"template": "worse", "name": "w1"}, timeout=10)
        assert "template 'worse' failed to load" in _error(made, 503, "agent_unavailable")
        _error(httpx.post(f"{url}/v1/agents/nobody/messages", json=message, timeout=10), 404, "unknown_agent")

        sent = subprocess.run(
            [pagemind_command(venv), "send", "helper", "hi", "--server", url],
            cwd=tmp_path,
            env=clean_env(PAGEMIND_HOME=str(tmp_path / "home")),
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert sent.returncode == 1 and "503" in sent.stderr and "nosuch_pkg" in sent.stderr, sent.stderr

        # fixed, the agent is served without a restart; removed, its name is simply unknown
        (folder / "helper.yaml").write_text(GOOD.replace("alice", "helper"))
        assert httpx.get(f"{url}/v1/agents/helper/memory", timeout=10).status_code == 200
        (folder / "typo.yaml").unlink()
        _error(httpx.post(f"{url}/v1/agents/typo/messages", json=message, timeout=10), 404, "unknown_agent")
        assert httpx.get(f"{url}/v1/ready", timeout=10).json()["agents_folder_error_count"] == 1  # worse.yaml
    finally:
        stderr = _stop(process)
    reported = [line for line in stderr.splitlines() if line.startswith("pagemind: not serving")]
    assert reported == [
        "pagemind: not serving agents/helper.yaml: line 4 tools[1]: cannot import module 'nosuch_pkg.tools' for "
        f"tool 'nosuch_pkg.tools:lookup' (looked beside the agent file, in {folder.resolve()}, and on the Python "
        "path): ModuleNotFoundError: No module named 'nosuch_pkg'",
        "pagemind: not serving agents/typo.yaml: line 3 YAML syntax: expected ',' or '}', but got ':'",
        "pagemind: not serving agents/worse.yaml: line 2 model.context_window: must be greater than 0; "
        "line 4 blockz: unknown key",
    ]
    # said before the daemon listens, and counted where it says what it serves
    serving = next(line for line in stderr.splitlines() if line.startswith("pagemind: serving"))
    assert stderr.index(reported[-1]) < stderr.index(serving)
    assert "serving 1 agent(s) from agents, 3 file(s) not loaded (above)" in serving


def test_probes_under_v1_and_the_docs_page_need_no_key_while_the_api_does(venv, tmp_path):
    _folder(tmp_path, alice=GOOD, helper=BROKEN_TOOL)
    process, url = _start(venv, tmp_path, PAGEMIND_API_TOKEN=TOKEN)
    try:
        for probe in ("health", "ready"):
            root, versioned = httpx.get(f"{url}/{probe}", timeout=10), httpx.get(f"{url}/v1/{probe}", timeout=10)
            assert root.status_code == versioned.status_code == 200, versioned.text
            assert root.json() == versioned.json()
        assert httpx.get(f"{url}/v1/health", timeout=10).json() == {"status": "ok"}
        # without the key: ready, and how many files do not load; not which, nor their YAML
        anonymous = httpx.get(f"{url}/v1/ready", timeout=10)
        assert anonymous.json() == {"status": "ready", "agents_folder_error_count": 1}
        assert "helper" not in anonymous.text and "nosuch_pkg" not in anonymous.text
        keyed = httpx.get(f"{url}/v1/ready", headers=KEY, timeout=10).json()
        [(path, why)] = keyed["agents_folder_errors"].items()
        assert path == "agents/helper.yaml" and "nosuch_pkg" in why and keyed["agents_folder_error_count"] == 1

        page = httpx.get(f"{url}/docs", timeout=10)
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        [spec_url] = re.findall(r"url: '([^']+)'", page.text)  # what Swagger UI fetches
        document = httpx.get(url + spec_url, timeout=10)
        assert document.status_code == 200, document.text
        spec = document.json()
        [(scheme, declared)] = spec["components"]["securitySchemes"].items()
        assert (declared["type"], declared["scheme"]) == ("http", "bearer")  # the page's "Authorize" button
        assert spec["security"] == [{scheme: []}]
        assert spec["paths"]["/v1/ready"]["get"]["security"] == []  # the open routes say they need nothing
        assert "security" not in spec["paths"]["/v1/agents"]["get"]  # the rest inherit the document's

        _error(httpx.get(f"{url}/v1/agents", timeout=10), 401, "unauthorized")
        assert httpx.get(f"{url}/v1/agents", headers=KEY, timeout=10).status_code == 200
    finally:
        _stop(process)
