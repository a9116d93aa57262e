"""A model server that ignores `stream: true` and answers one JSON body keeps working on every path that asks for a
stream (issue 36, item 5). The paths, and where each is checked:

- the model client (`ModelClient.stream`, every path below goes through it): tests/runtime/model/test_model_stream.py,
  `test_keep_alives_and_a_provider_that_ignores_stream_are_fine`;
- `pagemind run` / `chat` on a terminal (the reply printed as it is written): below;
- the daemon's event stream (`POST /v1/agents/{name}/messages/stream`, `GET /v1/runs/{id}/events`, and
  `pagemind send --server` on a terminal, which reads it): below, over TCP;
- the OpenAI-compatible proxy with `stream: true`: tests/scheduler/openai/test_proxy_sdk.py,
  `test_a_model_server_that_ignores_or_refuses_stream_still_streams_the_reply`; a turn that pauses for the app's own
  tools, streamed as tool-call deltas: tests/scheduler/openai/test_app_tools.py,
  `test_a_paused_turn_streamed_and_a_result_for_an_unknown_call`.
"""

from __future__ import annotations

import json
from pathlib import Path

import httpx

from pagemind.runtime.cli.main import main
from pagemind.runtime.testing.responses import tool_call_body
from tests.runtime.cli.test_cli_live_reply import Terminal
from tests.runtime.trace.test_trace_cli import home  # noqa: F401 — the fixture: a fresh PAGEMIND_HOME, mocked endpoint
from tests.scheduler.openai.served import served

COMPANION = str(Path(__file__).parents[3] / "agents" / "companion.yaml")


def test_run_on_a_terminal_prints_the_reply_of_a_server_that_answers_one_json_body(home, scripted_openai, monkeypatch):  # noqa: F811 — the fixture imported above
    body = tool_call_body("send_message", {"message": "Hello whole."})
    scripted_openai.add(httpx.Response(200, json=body))  # a JSON body, although the request says `stream: true`
    terminal = Terminal()
    monkeypatch.setattr("sys.stdout", terminal)
    assert main(["run", COMPANION, "-m", "hi"]) == 0
    assert terminal.getvalue() == "Hello whole.\n"
    assert scripted_openai.requests[0].get("stream") is True  # it was asked to stream


def test_the_daemons_event_stream_ends_with_the_reply_of_a_server_that_answers_one_json_body(tmp_path, sqlite_url):
    with served(tmp_path, sqlite_url, stream="ignore") as server:
        root = server.url.removesuffix("/v1")
        made = httpx.post(f"{root}/v1/agents", json={"template": "companion", "name": "c1"})
        assert made.status_code == 201, made.text
        events = []
        with httpx.stream("POST", f"{root}/v1/agents/c1/messages/stream", json={"content": "hi"}, timeout=60) as r:
            event = None
            for line in r.iter_lines():
                if line.startswith("event: "):
                    event = line.removeprefix("event: ")
                elif line.startswith("data: ") and event:
                    events.append((event, json.loads(line.removeprefix("data: "))))
        names = [name for name, _ in events]
        assert names[0] == "accepted" and names[-2:] == ["reply", "done"] and "error" not in names
        assert events[-2][1] == {"text": "echo: hi"}
        assert "reply_delta" not in names  # nothing streamed: the reply arrives whole
