"""A trace of an agent with an MCP server replays without starting it, trusted or not: the server's tools are
stand-ins serving their recorded results (a trace is shared text; `spec.mcp`)."""

from __future__ import annotations

import json

from pagemind.runtime.agent import Agent
from pagemind.runtime.loop import run_turn
from pagemind.runtime.spec.loading import load_spec
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.models import ScriptedModel
from pagemind.runtime.testing.responses import tool_call_body
from pagemind.runtime.trace.reader import read_trace
from pagemind.runtime.trace.recorder import record
from pagemind.runtime.trace.replay import replay
from tests.runtime.mcp.test_mcp_client import agent_file


async def test_a_replay_serves_an_mcp_tools_recorded_result_and_starts_no_server(tmp_path, clock):
    marker = tmp_path / "started.txt"
    spec = load_spec(agent_file(tmp_path, extra=f"env: {{MCP_TEST_MARKER: {json.dumps(str(marker))}}}"))
    model = ScriptedModel([tool_call_body("add", {"a": 4, "b": 5}), tool_call_body("send_message", {"message": "9"})])
    store = StateStore(make_engine(f"sqlite:///{tmp_path / 'a.db'}"))
    agent = await Agent.load(spec, model=model, store=store, clock=clock)
    record(agent, path=tmp_path / "mcp.jsonl")
    try:
        turn = await run_turn(agent, "4 + 5?")
    finally:
        await agent.mcp.close()  # type: ignore[union-attr]  # the agent has a server
    assert turn.reply == "9" and marker.read_text() == "started\n"
    assert next(m for m in turn.messages if m.name == "add").content == "9"

    marker.unlink()
    for trusted in (False, True):
        report = await replay(read_trace(tmp_path / "mcp.jsonl"), trust_tools=trusted)
        assert report.status == "identical", report.divergence
    assert not marker.exists()
