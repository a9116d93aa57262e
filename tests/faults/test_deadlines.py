"""Hangs and trickles against a real local HTTP server: each attempt ends at `model.request_timeout_s`, the turn at
`model.turn_deadline_s`, the CLI exits 1 with one line, and the agent answers the next message at once
(issue 10, item 3). Deadlines are fractions of a second; nothing asserts how long anything took."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import yaml

from pagemind.runtime.model.client import ModelDeadlineExceeded, ModelRequest, OpenAIModelClient
from pagemind.runtime.spec.agent import ModelSpec
from pagemind.runtime.testing.responses import reply_body
from pagemind.runtime.testing.specs import build_spec, spec_data
from tests.faults.server import Hang, Reply, Trickle
from tests.runtime.model.test_model_stream import Watcher, sink

REQUEST = ModelRequest("m", [{"role": "user", "content": "hi"}], [], 0.5, 100)


async def test_a_hanging_server_ends_each_attempt_at_the_request_timeout(fault_server, real_client):
    fault_server.add(Hang(), Hang())
    with pytest.raises(ModelDeadlineExceeded, match=r"request_timeout_s = 0.2 s in 2 attempts"):
        await real_client(fault_server.url, 0.2).complete(REQUEST)
    assert len(fault_server.requests) == 2


async def test_a_trickling_server_ends_at_the_request_timeout_though_every_byte_resets_the_read_timeout(
    fault_server, real_client
):
    fault_server.add(Trickle(0.01), Trickle(0.01))
    with pytest.raises(ModelDeadlineExceeded, match="no complete answer"):
        await real_client(fault_server.url, 0.3).complete(REQUEST)
    assert len(fault_server.requests) == 2


TOKEN = b'data: {"choices": [{"index": 0, "delta": {"content": "la"}}]}\n\n'


@pytest.mark.parametrize("piece", [b": keep-alive\n\n", TOKEN], ids=["keep_alives", "tokens"])
async def test_a_trickling_stream_ends_at_the_request_timeout_and_its_partial_reply_is_reset(
    fault_server, piece, real_client
):
    fault_server.add(*[Trickle(0.01, piece, "text/event-stream")] * 2)
    watcher = Watcher()
    with pytest.raises(ModelDeadlineExceeded, match="no complete answer"):
        await real_client(fault_server.url, 0.3).stream(REQUEST, sink(watcher))
    assert len(fault_server.requests) == 2 and all(r["stream"] for r in fault_server.requests)
    assert watcher.held() == "" and len(watcher.resets()) == (2 if piece == TOKEN else 0)


async def test_a_hang_then_an_answer_is_retried(fault_server, real_client):
    fault_server.add(Hang(), Reply(reply_body("made it")))
    assert (await real_client(fault_server.url, 0.2).complete(REQUEST)).content == "made it"


def hanging_agent_spec(url: str, **model: float):
    data = spec_data()
    data["model"] = {**data["model"], "base_url": url, **model}
    return build_spec(**{k: v for k, v in data.items() if k != "name"})


async def test_a_turn_ends_at_its_deadline_and_the_agent_answers_the_next_message(fault_server, make_agent, sqlite_url):
    fault_server.add(*[Hang()] * 10)  # more than the turn can use: the deadline, not the attempts, ends it
    spec = hanging_agent_spec(fault_server.url, request_timeout_s=0.2, turn_deadline_s=0.5)
    agent = await make_agent(sqlite_url, None, spec=spec)
    with pytest.raises(ModelDeadlineExceeded, match=r"turn_deadline_s = 0.5 s"):
        await agent.send("Hi, I'm Lin.")
    assert [m.role for m in agent.window.messages] == ["user"]  # the accepted message stays; no half step

    fault_server.script.clear()
    fault_server.add(Reply(reply_body("Hello Lin.")))
    assert await agent.send("Are you there?") == "Hello Lin."
    assert [m.content for m in agent.window.messages] == ["Hi, I'm Lin.", "Are you there?", "Hello Lin."]
    assert not any(m["content"] is None for m in fault_server.requests[-1]["messages"])


async def test_a_watched_turn_whose_tokens_trickle_ends_at_the_turn_deadline(fault_server, make_agent, sqlite_url):
    fault_server.add(*[Trickle(0.01, TOKEN, "text/event-stream")] * 10)
    spec = hanging_agent_spec(fault_server.url, request_timeout_s=30, turn_deadline_s=0.5)
    agent = await make_agent(sqlite_url, None, spec=spec)
    agent.observer = watcher = Watcher()
    with pytest.raises(ModelDeadlineExceeded, match=r"turn_deadline_s = 0.5 s"):
        await agent.send("Hi, I'm Lin.")
    assert fault_server.requests[0]["stream"] is True
    assert "la" in [getattr(e, "text", None) for e in watcher.events] and watcher.held() == ""
    assert [m.role for m in agent.window.messages] == ["user"]


def test_the_cli_exits_1_with_one_line_on_a_deadline(fault_server, tmp_path, isolated_home):
    fault_server.add(*[Hang()] * 10)
    data = spec_data("deadline")
    data["model"] = {**data["model"], "base_url": fault_server.url, "request_timeout_s": 0.2, "turn_deadline_s": 0.5}
    path = tmp_path / "deadline.yaml"
    path.write_text(yaml.safe_dump(data))
    # PAGEMIND_LOG_LEVEL=ERROR: the retries' warnings are logs, not the error line.
    env = {**os.environ, "PAGEMIND_HOME": str(isolated_home), "PAGEMIND_LOG_LEVEL": "ERROR"}
    done = subprocess.run(
        [sys.executable, "-m", "pagemind.runtime.cli.main", "run", str(path), "-m", "hello?"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    assert done.stderr.count("\n") == 1 and done.stderr.startswith("error: "), done.stderr
    assert "turn_deadline_s = 0.5 s" in done.stderr and "Traceback" not in done.stderr
    assert done.stdout == ""


def test_the_yaml_fields_default_and_validate():
    model = ModelSpec(name="m")
    assert (model.request_timeout_s, model.turn_deadline_s) == (60, 300)
    with pytest.raises(ValueError):
        ModelSpec(name="m", request_timeout_s=0)
    client = OpenAIModelClient.from_spec(ModelSpec(name="m", request_timeout_s=7), {"OPENAI_BASE_URL": "http://x/v1"})
    assert client.request_timeout_s == 7 and client.client.timeout.read == 7


async def test_the_turn_deadline_includes_tool_calls_and_stores_nothing_of_the_step(make_agent, sqlite_url):
    from pagemind.runtime.testing.models import ScriptedModel
    from pagemind.runtime.testing.responses import tool_call_body

    data = spec_data()
    data["model"] = {**data["model"], "turn_deadline_s": 0.3}
    spec = build_spec(
        **{
            **{k: v for k, v in data.items() if k != "name"},
            "tools": ["send_message", "core_memory_append", "tests.faults.slow_tools:wait_for_approval"],
        }
    )
    model = ScriptedModel([tool_call_body("wait_for_approval", {"request": "delete everything"})])
    agent = await make_agent(sqlite_url, model, spec=spec)
    with pytest.raises(ModelDeadlineExceeded, match=r"turn_deadline_s = 0.3 s"):
        await agent.send("Please do it.")
    assert [m.role for m in agent.store.all_messages(agent.record.id)] == ["user"]
    assert agent.store.steps(agent.record.id) == []

    model.add(reply_body("I could not get approval in time."))
    assert await agent.send("Well?") == "I could not get approval in time."
