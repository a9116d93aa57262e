"""`memory.review: required`: what extraction, reflection and (configured) the model's own inserts write waits as
pending — not searchable, not prefetched — until approved (and pinned), edited or rejected; a pinned memory is never
dormant, expired or superseded by reflection. On SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from pagemind.runtime.agent import Agent
from pagemind.runtime.memory.lifecycle.activity import Activity
from pagemind.runtime.memory.lifecycle.decay import disuse_weight, hidden_reason
from pagemind.runtime.memory.vectors.stores import close_all
from pagemind.runtime.pressure.extraction import ExtractedItem, Extraction, store_extraction
from pagemind.runtime.process.settings import Settings
from pagemind.runtime.reflection.apply import apply_plan
from pagemind.runtime.reflection.schema import Done, Insight, Merge, ReflectionOutput
from pagemind.runtime.spec.loading import parse_spec
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.store import StateStore
from tests.support.model_server import last_turn_message, last_user_text, model_server, tool_calls

YAML = """
name: reviewed
model: {{name: gpt-4o-mini, base_url: "{url}", api_key_env: OPENAI_API_KEY}}
system: You keep notes.
tools: [send_message, archival_memory_insert, archival_search]
memory:
  review: {{extraction: required, reflection: required, archival_memory_insert: required}}
"""


def completion(body):
    if last_turn_message(body).get("role") == "user":
        return tool_calls(("archival_memory_insert", {"content": f"The user said: {last_user_text(body)}"}))
    return tool_calls(("send_message", {"message": "Noted."}))


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    yield
    close_all()


async def load(url: str, database_url: str, home) -> Agent:
    settings = Settings.from_env().model_copy(update={"database_url": database_url, "home": home})
    spec = parse_spec(YAML.format(url=url))
    return await Agent.load(spec, settings=settings, store=StateStore(make_engine(database_url)))


async def test_held_memories_are_invisible_until_approved_and_a_rejected_one_is_gone(database_url, isolated_home):
    with model_server(completion) as url:
        agent = await load(url, database_url, isolated_home)
        reply = await agent.run_turn("my locker code is ORCHID-77")
    queue, archival = agent.review_queue, agent.archival
    assert queue is not None and archival is not None
    [tool] = [m for m in reply.messages if m.role == "tool" and m.name == "archival_memory_insert"]
    assert "review" in (tool.content or "")
    extraction = Extraction(facts=[ExtractedItem(text="Sam's sister Mei lives in Oslo")])
    report = await store_extraction(archival, extraction, [], review=queue)
    assert report.stored == 1
    pending = queue.pending()
    assert [(p.origin, p.text) for p in pending] == [
        ("archival_memory_insert", "The user said: my locker code is ORCHID-77"),
        ("extraction", "Sam's sister Mei lives in Oslo"),
    ]
    assert archival.list() == [] and await archival.search("locker code ORCHID-77") == []
    await agent.prefetch("what is my locker code? ORCHID-77")
    assert agent.retrieved == ()

    locker, sister = pending
    assert queue.edit(sister.id, "Sam's sister Mei lives in Bergen")
    assert queue.reject(locker.id) and not queue.reject(locker.id)
    memory_id = await queue.approve(sister.id, pin=True)
    assert queue.pending() == []
    [stored] = archival.list()
    assert (stored.id, stored.text, "pinned" in stored.tags) == (memory_id, "Sam's sister Mei lives in Bergen", True)
    assert [h.id for h in await archival.search("where does Mei live? Bergen")] == [memory_id]
    assert all("ORCHID-77" not in m.text for m in archival.list(include_superseded=True))
    alarm = await queue.hold("extraction", "Sam's alarm code is ZEBRA-9931")  # said nowhere else
    folder = Path(database_url.removeprefix("sqlite:///")).parent
    holding = lambda: [p.name for p in folder.rglob("*") if p.is_file() and b"ZEBRA-9931" in p.read_bytes()]  # noqa: E731
    if database_url.startswith("sqlite"):  # a rejected memory leaves no byte in the database or its WAL
        assert holding() and queue.reject(alarm) and holding() == []
    agent.store.engine.dispose()


async def test_a_pinned_memory_is_never_dormant_nor_superseded_by_reflection(database_url, isolated_home):
    with model_server(completion) as url:
        agent = await load(url, database_url, isolated_home)
    archival = agent.archival
    assert archival is not None and agent.review_queue is not None
    kept = (await archival.insert("Sam is allergic to peanuts", tags=["health"])).id
    pinned = (await archival.insert("Sam carries an EpiPen everywhere", tags=["health"])).id
    todo = (await archival.insert("Sam must renew the EpiPen prescription", kind="todo")).id
    trip = (await archival.insert("Sam is in Paris until Friday", kind="todo")).id
    assert next(m for m in archival.list() if m.id == trip).expires_at is not None
    assert await archival.pin(pinned) and await archival.pin(todo) and await archival.pin(trip)
    assert next(m for m in archival.list() if m.id == trip).expires_at is None  # pinned: never expires
    output = ReflectionOutput(
        merges=[Merge(keep=kept, drop=[pinned], reason="same topic")],
        insights=[Insight(text="Sam plans carefully around the allergy")],
        done=[Done(id=todo, reason="renewed")],
    )
    counts = await apply_plan(agent, archival, "r1", output, "profile")
    assert counts == {"held": 1}  # the insight waits for review; the pinned memories are untouched
    assert {m.id for m in archival.list()} == {kept, pinned, todo, trip}
    [insight] = agent.review_queue.pending()
    assert (insight.origin, insight.kind) == ("reflection", "reflection")
    assert await agent.review_queue.approve(insight.id) == insight.id  # under its derived id
    record = next(m for m in archival.list() if m.id == pinned)
    later = record.created_at + timedelta(days=400)
    never_used = Activity(tuple(record.created_at.date() + timedelta(days=n) for n in range(1, 400)), later.date())
    assert disuse_weight(record, never_used, archival.config.expiry) == 1.0
    assert hidden_reason(record, later, archival.config.expiry, never_used) is None
    agent.store.engine.dispose()
