"""Every shipped agent definition loads and runs one scripted turn."""

from pathlib import Path

import pytest

from pagemind.runtime.agent import Agent
from pagemind.runtime.loop import run_turn
from pagemind.runtime.spec.loading import load_spec
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.responses import tool_call_body as tool_call
from pagemind.runtime.turn_outcomes import StopReason

AGENT_FILES = sorted((Path(__file__).parents[2] / "agents").glob("*.yaml"))


def test_the_two_required_agents_ship():
    names = {p.stem for p in AGENT_FILES}
    assert {"companion", "assistant"} <= names
    assert "constraints" in [b.label for b in load_spec(Path("agents/companion.yaml")).blocks]
    assert "plan" in [b.label for b in load_spec(Path("agents/assistant.yaml")).blocks]


@pytest.mark.parametrize("path", AGENT_FILES, ids=lambda p: p.name)
async def test_agent_file_runs_one_scripted_turn(path, scripted_openai, sqlite_url):
    spec = load_spec(path)
    first_block = spec.blocks[1].label
    scripted_openai.add(
        tool_call("core_memory_append", {"label": first_block, "content": "Name: Lin"}),
        tool_call("send_message", {"message": "Hello Lin"}),
    )
    agent = await Agent.load(path, model=scripted_openai.client(), store=StateStore(make_engine(sqlite_url)))
    result = await run_turn(agent, "Hi, I'm Lin.")
    assert (result.reply, result.stop_reason) == ("Hello Lin", StopReason.SEND_MESSAGE)
    assert "Name: Lin" in agent.memory.get(first_block).value
    sent_tools = {t["function"]["name"] for t in scripted_openai.requests[0]["tools"]}
    assert sent_tools == set(spec.tools)
