"""The pinned part of the shipped companion's prompt — what every request carries whatever was said: the system
message (instructions and core blocks) and the tool schemas — stays lean (issue #37: at most 1,600 tokens with all
of its tools, forget and mute included; it was 2,486)."""

from __future__ import annotations

from pathlib import Path

from pagemind.runtime.agent import Agent
from pagemind.runtime.process.settings import Settings
from pagemind.runtime.spec.loading import load_spec
from pagemind.runtime.testing.models import FunctionModel
from pagemind.runtime.testing.responses import reply_body

ROOT = Path(__file__).parents[3]
PINNED_MAX = 1600


async def test_the_shipped_companions_pinned_part_is_at_most_1600_tokens(tmp_path):
    spec = load_spec(ROOT / "runtime" / "data" / "agents" / "companion.yaml")
    settings = Settings(home=tmp_path, database_url=f"sqlite:///{tmp_path / 'p.db'}")
    agent = await Agent.load(spec, model=FunctionModel(lambda r: reply_body("hi")), settings=settings)
    sections = agent.compile().sections
    pinned = sum(
        tokens for name, tokens in sections.items() if name in ("system", "tools") or name.startswith("block:")
    )
    assert (
        set(agent.tools)
        == set(spec.tools)
        == {
            "send_message",
            "core_memory_append",
            "core_memory_replace",
            "memory_rethink",
            "core_memory_update",
            "archival_memory_insert",
            "archival_search",
            "conversation_search",
            "forget",
            "mute_topic",
            "unmute_topic",
        }
    )
    assert pinned <= PINNED_MAX, sections
