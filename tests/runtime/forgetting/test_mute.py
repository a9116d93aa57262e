"""A muted topic never resurfaces: over 200 scripted turns that keep touching it, with archival and recall searches
at every turn, prefetch, flushes (summary and extraction) and an extractor that proposes it again, no request body
holds what is remembered about it; the rest of memory still comes back; unmuting brings it back."""

from __future__ import annotations

import json
from typing import Any

import pytest

from pagemind.runtime.memory.vectors.stores import close_all
from tests.runtime.forgetting.support import load
from tests.support.model_server import last_turn_message, last_user_text, model_server, reply, tool_calls

SECRET, TEA = "LISBONCANARY", "TEACANARY"
BODIES: list[str] = []


def completion(body: dict[str, Any]) -> dict[str, Any]:
    BODIES.append(json.dumps(body, ensure_ascii=False))
    system = str(body["messages"][0].get("content") or "")
    if system.startswith("Extract lasting memories"):  # the extractor proposes the muted fact again
        return reply(json.dumps({"facts": [{"text": f"Sam's ex Mark now lives in {SECRET}"}]}))
    if not body.get("tools"):
        return reply("They chatted about their week.")
    said = last_user_text(body)
    if last_turn_message(body).get("role") == "user":
        if said.startswith("mute ") or said.startswith("unmute "):
            verb, topic = said.split(" ", 1)
            return tool_calls((f"{verb}_topic", {"topic": topic}))
        return tool_calls(("archival_search", {"query": said}), ("conversation_search", {"query": "Mark ex"}))
    return tool_calls(("send_message", {"message": "I hear you."}))


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    BODIES.clear()
    yield
    close_all()


async def test_a_muted_topic_never_resurfaces_in_200_turns(database_url, isolated_home):
    with model_server(completion) as url:
        agent = await load(url, database_url, isolated_home, name="muter")
        agent.spec.model.context_window = 3000  # flushes (summary, extraction) within the conversation
        await agent.archival.insert(f"Sam's ex Mark moved to {SECRET} in 2019 after the breakup")
        await agent.archival.insert(f"Sam drinks {TEA} green tea every morning")
        await agent.send("mute my ex Mark")
        assert agent.forgetting.mutes is not None and agent.forgetting.mutes.topics() == ["my ex Mark"]
        BODIES.clear()
        for turn in range(200):
            topic = ("Mark called me again", "my ex wants to meet", "I miss Mark", "where does Mark live now?")
            await agent.send(topic[turn % 4] if turn % 10 else f"what tea do I like, {TEA}?")
        touched = [b for b in BODIES if SECRET in b]
        assert len(BODIES) >= 400 and touched == []
        assert any(f"{TEA} green tea" in b for b in BODIES)  # the rest of memory still comes back
        assert any("Extract lasting memories" in b for b in BODIES)  # the extractor ran (and its proposal was dropped)
        assert sum(SECRET in m.text for m in agent.archival.list()) == 1  # the seed only: the proposal was dropped
        await agent.send("unmute my ex Mark")
        BODIES.clear()
        await agent.send("I miss Mark")
    assert any(SECRET in b for b in BODIES)
    agent.store.engine.dispose()
