"""An agent's MCP servers: a real server written with the SDK (tests/support/mcp_server.py) started as a subprocess
by the agent; its tools reach the model with their schemas, a call's result comes back, a server that hangs or dies
becomes a tool error the model reads and the turn finishes, the session restarts at the next call, and a server
that says its tools changed is listed again. A spec from a shared source starts nothing; a client's is refused."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from pagemind.runtime.agent import Agent
from pagemind.runtime.mcp.toolset import McpToolset
from pagemind.runtime.model.client import ModelRequest
from pagemind.runtime.spec.agent import AgentSpec
from pagemind.runtime.spec.loading import SpecError, load_spec, parse_spec
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.models import FunctionModel, by_purpose
from pagemind.runtime.testing.responses import reply_body, tool_call_body
from pagemind.runtime.turn_outcomes import StopReason

SERVER = Path(__file__).parents[2] / "support" / "mcp_server.py"

AGENT = """\
name: mcp-user
model: {{name: gpt-4o-mini}}
system: Use the tools, then answer with send_message.
tools:
  - send_message
  - mcp:
      command: {python}
      args: [{server}]
      timeout_s: {timeout}
      {extra}
"""


def agent_file(tmp_path: Path, timeout: float = 2.0, extra: str = "") -> Path:
    """An agent YAML beside the test, naming the test server (JSON strings: any path is valid YAML)."""
    path = tmp_path / "agent.yaml"
    text = AGENT.format(python=json.dumps(sys.executable), server=json.dumps(str(SERVER)), timeout=timeout, extra=extra)
    path.write_text(text)
    return path


def last_tool_message(request: ModelRequest) -> dict[str, Any] | None:
    """The latest tool result the model was shown, if the prompt's last turn message is one."""
    turn = [m for m in request.messages if m.get("role") != "system"]
    return turn[-1] if turn and turn[-1].get("role") == "tool" else None


def calling(name: str, arguments: dict[str, Any]) -> FunctionModel:
    """A model that calls `name` once, then sends back what the tool answered."""

    def step(request: ModelRequest) -> dict[str, Any]:
        seen = last_tool_message(request)
        if seen is None:
            return tool_call_body(name, arguments)
        return tool_call_body("send_message", {"message": f"tool said: {seen['content']}"})

    return FunctionModel(by_purpose(step))


async def load(path: Path, model: FunctionModel, database_url: str) -> Agent:
    store = StateStore(make_engine(database_url))
    return await Agent.load(load_spec(path), model=model, store=store)


def schemas(request: ModelRequest) -> dict[str, dict[str, Any]]:
    return {s["function"]["name"]: s["function"] for s in request.tools}


async def test_a_server_tool_is_offered_with_its_schema_and_its_result_reaches_the_model(tmp_path, sqlite_url):
    model = calling("add", {"a": 2, "b": 3})
    agent = await load(agent_file(tmp_path), model, sqlite_url)
    try:
        turn = await agent.run_turn("what is 2 + 3?")
        offered = schemas(model.requests[0])
        assert {"send_message", "add", "shout", "hang", "crash", "grow"} <= offered.keys()
        assert offered["add"]["parameters"]["required"] == ["a", "b"]
        assert offered["add"]["description"] == "Add two whole numbers."
        assert turn.reply == "tool said: 5"
        assert turn.stop_reason is StopReason.SEND_MESSAGE
        tool_message = next(m for m in turn.messages if m.role == "tool" and m.name == "add")
        assert not tool_message.is_error
    finally:
        await agent.mcp.close()  # type: ignore[union-attr]  # the agent has a server


async def test_a_hanging_server_times_out_into_a_tool_error_and_the_turn_finishes(tmp_path, sqlite_url):
    model = calling("hang", {})
    agent = await load(agent_file(tmp_path, timeout=1.0), model, sqlite_url)
    try:
        turn = await agent.run_turn("wait for it")
        assert turn.stop_reason is StopReason.SEND_MESSAGE
        error = next(m for m in turn.messages if m.role == "tool" and m.name == "hang")
        assert error.is_error and "did not answer tool hang within 1 s" in error.content
        assert turn.reply is not None and "did not answer" in turn.reply
    finally:
        await agent.mcp.close()  # type: ignore[union-attr]


async def test_a_server_that_dies_is_a_tool_error_and_restarts_at_the_next_call(tmp_path, sqlite_url):
    def step(request: ModelRequest) -> dict[str, Any]:
        seen = last_tool_message(request)
        if seen is None:
            return tool_call_body("crash", {})
        if "Connection closed" in seen["content"]:  # the crash's error
            return tool_call_body("add", {"a": 20, "b": 22})
        return tool_call_body("send_message", {"message": f"after the crash: {seen['content']}"})

    agent = await load(agent_file(tmp_path), FunctionModel(by_purpose(step)), sqlite_url)
    try:
        turn = await agent.run_turn("crash, then add")
        crashed = next(m for m in turn.messages if m.role == "tool" and m.name == "crash")
        assert crashed.is_error and "failed on tool crash" in crashed.content
        assert turn.reply == "after the crash: 42"  # a new server process answered
    finally:
        await agent.mcp.close()  # type: ignore[union-attr]


async def test_a_tool_error_of_the_server_reaches_the_model(tmp_path, sqlite_url):
    agent = await load(agent_file(tmp_path), calling("shout", {"text": ""}), sqlite_url)
    try:
        turn = await agent.run_turn("shout nothing")
        error = next(m for m in turn.messages if m.role == "tool" and m.name == "shout")
        assert error.is_error and "nothing to shout" in error.content
    finally:
        await agent.mcp.close()  # type: ignore[union-attr]


async def test_tools_are_listed_again_when_the_server_says_they_changed(tmp_path, sqlite_url):
    model = calling("grow", {})
    agent = await load(agent_file(tmp_path), model, sqlite_url)
    try:
        await agent.run_turn("grow")
        assert "late" not in schemas(model.requests[0])
        model.function = by_purpose(lambda request: reply_body("ok"))
        await agent.run_turn("and now?")
        assert "late" in schemas(model.requests[-1])
    finally:
        await agent.mcp.close()  # type: ignore[union-attr]


async def test_a_prefix_names_the_tools_and_a_taken_name_is_refused(tmp_path, sqlite_url):
    path = agent_file(tmp_path, extra="prefix: calc_")
    spec = load_spec(path)
    twice = spec.model_copy(update={"mcp_servers": [*spec.mcp_servers, spec.mcp_servers[0]]})
    toolset = McpToolset.for_servers(twice.mcp_servers)
    assert toolset is not None
    tools = twice.resolved_tools()
    try:
        await toolset.sync(tools)
        assert "calc_add" in tools and "add" not in tools
        assert tools["calc_add"] is not None and len([n for n in tools if n.startswith("calc_")]) == 5
        assert {("python", "calc_add")} <= {(label.split()[0][:6], name) for label, name in toolset.refused}
    finally:
        await toolset.close()


def test_a_spec_from_a_shared_source_starts_no_server_and_a_client_may_name_none(tmp_path):
    text = agent_file(tmp_path).read_text()
    shared = parse_spec(text, trust="shared")
    assert shared.tools == ["send_message"] and len(shared.mcp_servers) == 1
    assert McpToolset.for_servers(shared.mcp_servers) is None
    stored = AgentSpec.model_validate_json(shared.model_dump_json(), context={"trust": "shared"})
    assert McpToolset.for_servers(stored.mcp_servers) is None
    with pytest.raises(SpecError) as refused:
        parse_spec(text, trust="client")
    assert refused.value.refused and "tools[1].mcp" in str(refused.value)


def test_a_wrong_entry_is_reported_where_it_is_written(tmp_path):
    with pytest.raises(SpecError) as error:
        parse_spec("name: a\nmodel: {name: m}\nsystem: s\ntools:\n  - send_message\n  - mcp: {args: [x]}\n", "a.yaml")
    assert str(error.value).startswith("a.yaml:6 tools[1].mcp: give either `command`")


async def test_a_server_that_cannot_start_gives_no_tools_and_the_turn_goes_on(tmp_path, sqlite_url):
    path = tmp_path / "agent.yaml"
    path.write_text(
        "name: lonely\nmodel: {name: m}\nsystem: s\n"
        f"tools: [send_message, {{mcp: {{command: {json.dumps(str(tmp_path / 'no-such-server'))}}}}}]\n"
    )
    model = FunctionModel(by_purpose(lambda request: reply_body("fine without it")))
    agent = await load(path, model, sqlite_url)
    turn = await agent.run_turn("hello")
    assert turn.reply == "fine without it"
    assert set(schemas(model.requests[0])) == {"send_message"}
    assert agent.mcp is not None and 0 in agent.mcp.retry_at  # tried again later, not at every turn
    await agent.run_turn("again")
    assert len(agent.mcp.retry_at) == 1 and not agent.mcp.connections[0].is_open
