"""Archival memories relevant to a turn are fetched into the prompt; unrelated turns fetch nothing."""

from pagemind.runtime.agent import Agent
from pagemind.runtime.loop import run_turn
from pagemind.runtime.process.settings import Settings
from pagemind.runtime.testing.models import FunctionModel
from pagemind.runtime.testing.responses import tool_call_body
from pagemind.runtime.testing.specs import build_spec


def retrieved_section(closing: str) -> str:
    start = closing.find("<retrieved_memories>")
    return closing[start : closing.index("</retrieved_memories>")] if start >= 0 else ""


async def test_relevant_memories_are_prefetched_into_the_prompt(tmp_path, clock):
    spec = build_spec(tools=["send_message", "archival_memory_insert", "archival_search"])
    settings = Settings(home=tmp_path, database_url=f"sqlite:///{tmp_path / 'p.db'}")
    model = FunctionModel(lambda request: tool_call_body("send_message", {"message": "ok"}))
    agent = await Agent.load(spec, model=model, settings=settings, clock=clock)
    await agent.archival.insert("Lin is severely allergic to peanuts.", kind="constraint", importance=0.9)
    await agent.archival.insert("Lin's sister Mei loves hiking near Oslo.", kind="fact")

    await run_turn(agent, "Could you suggest a snack with peanuts for my party?")
    section = retrieved_section(model.requests[-1].messages[-1]["content"])
    assert "allergic to peanuts" in section and "(constraint)" in section

    await run_turn(agent, "What is the boiling point of mercury in kelvin?")
    assert retrieved_section(model.requests[-1].messages[-1]["content"]) == ""
    # Prefetching is not a use: hit counts only move when the model searches.
    [memory] = [m for m in agent.archival.list() if "peanuts" in m.text]
    assert memory.hit_count == 0
