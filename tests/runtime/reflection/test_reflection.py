"""Reflection (issue 13, item 1): one bounded model call that merges, resolves contradictions, writes insights,
patches the profile and marks todos done; bad output changes nothing; a rerun after a crash applies nothing twice.

The agent is real (SQL, the embedded vector store, the shipped embedder); the model is scripted: `FunctionModel`
answers the reflection's request with the plan a test gives, `ScriptedOpenAI` plays the provider at the HTTP layer.
"""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest

from pagemind.runtime.agent import Agent
from pagemind.runtime.memory.vectors.records import MemoryRecord
from pagemind.runtime.messages import Message
from pagemind.runtime.reflection.journal import Journal
from pagemind.runtime.reflection.run import due_reflection, reflect
from pagemind.runtime.reflection.schema import ReflectionOutput
from pagemind.runtime.spec.agent import DEFAULT_TOOLS, AgentSpec
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.clock import ManualClock
from pagemind.runtime.testing.endpoint import http_error
from pagemind.runtime.testing.models import FunctionModel
from pagemind.runtime.testing.responses import reply_body
from pagemind.runtime.testing.specs import spec_data
from pagemind.runtime.tokens import TOKENS_PER_MESSAGE, TOKENS_REPLY_PRIMING, count_tokens

PROFILE = {"name": "Lin", "city": "Berlin"}


def reflection_spec(profile: str | None = json.dumps(PROFILE), **reflection: Any):
    """The test agent with a `profile` block (a plain JSON value) and `memory.reflection` options."""
    data = spec_data(
        memory={"reflection": reflection}, tools=[*DEFAULT_TOOLS, "archival_memory_insert", "archival_search"]
    )
    if profile is not None:
        data["blocks"].append({"label": "profile", "value": profile, "limit": 300, "description": "The user."})
    return AgentSpec.model_validate(data)


class Planner:
    """A model that answers a reflection with `answer` (a plan dict, or raw text) and keeps the requests."""

    def __init__(self, answer: dict[str, Any] | str | None = None):
        self.answer: dict[str, Any] | str = answer if answer is not None else {}
        self.model = FunctionModel(self.respond)

    def respond(self, request) -> dict[str, Any]:
        assert request.purpose == "reflect", request.purpose
        answer = self.answer(self.payload(request)) if callable(self.answer) else self.answer
        return reply_body(answer if isinstance(answer, str) else json.dumps(answer))

    @staticmethod
    def payload(request) -> dict[str, Any]:
        """The request's JSON object (the contract: one system message, one user message holding it)."""
        assert [m["role"] for m in request.messages] == ["system", "user"]
        return json.loads(request.messages[1]["content"])

    @property
    def requests(self) -> list[Any]:
        return self.model.requests


async def load(url: str, model: Any, clock: ManualClock, spec=None) -> Agent:
    return await Agent.load(spec or reflection_spec(), model=model, store=StateStore(make_engine(url)), clock=clock)


def say(agent: Agent, *lines: str) -> list[Message]:
    """Store a conversation (user and assistant in turn), a minute apart."""
    messages = []
    for n, text in enumerate(lines):
        agent.clock.advance(minutes=1)
        messages.append(Message("user" if n % 2 == 0 else "assistant", text, agent.clock()))
    return agent.store.append_messages(agent.record.id, messages)


async def remember(agent: Agent, text: str, kind: str = "fact", sources: list[int] | None = None) -> str:
    """Store a memory as it is (past the write path's dedupe and supersede, which would fold near-copies)."""
    now = agent.clock()
    record = MemoryRecord(
        id=str(uuid.uuid4()),
        agent_id=agent.record.id,
        text=text,
        kind=kind,
        created_at=now,
        updated_at=now,
        source_message_ids=sources or [],
    )
    return (await agent.archival.insert_event(record)).id


def state(agent: Agent) -> tuple[Any, ...]:
    """Everything a reflection may change: memories (with supersession), their histories, the blocks."""
    memories = sorted((m.id, m.superseded_by, m.text) for m in agent.archival.list(include_superseded=True))
    histories = {m[0]: [(v.operation, v.detail) for v in agent.archival.history(m[0])] for m in memories}
    return (
        memories,
        histories,
        [(b.label, b.value) for b in agent.memory.blocks],
        agent.store.block_history(agent.record.id),
    )


async def test_a_merge_keeps_one_and_supersedes_the_other_with_reason_and_reflection_id(database_url, clock):
    planner = Planner()
    agent = await load(database_url, planner.model, clock)
    said = say(agent, "My sister Mei visits on Sunday.", "How lovely!")
    keep = await remember(agent, "Lin's sister is Mei", sources=[said[0].id])
    drop = await remember(agent, "Lin has a sibling called Mei who visits", sources=[said[0].id])
    planner.answer = {"merges": [{"keep": keep, "drop": [drop], "reason": "same fact"}]}

    result = await reflect(agent)

    assert result["status"] == "done" and result["changes"] == {"merged": 1}
    [request] = planner.requests
    assert request.response_format["type"] == "json_schema"
    assert request.response_format["json_schema"]["schema"] == ReflectionOutput.model_json_schema()
    payload = Planner.payload(request)
    assert [(m["id"], m["role"], m["text"]) for m in payload["messages"]] == [
        (said[0].id, "user", "My sister Mei visits on Sunday."),
        (said[1].id, "assistant", "How lovely!"),
    ]
    assert {m["id"] for m in payload["memories"]} == {keep, drop}
    assert payload["profile"] == PROFILE and payload["profile_schema"] is None
    live = {m.id for m in agent.archival.list()}
    assert keep in live and drop not in live
    superseded = agent.archival.history(drop)[-1]
    assert superseded.operation == "superseded" and superseded.detail["superseded_by"] == keep
    assert superseded.detail["reason"] == "same fact"
    assert superseded.detail["reflection_id"] == result["reflection_id"]
    [row] = Journal(agent.store.engine, agent.record.id).all()
    assert (row.status, row.counts, row.last_message_id, row.plan) == ("done", {"merged": 1}, said[-1].id, None)


async def test_a_contradiction_supersedes_the_loser_which_stays_listed(sqlite_url, clock):
    planner = Planner()
    agent = await load(sqlite_url, planner.model, clock)
    old = await remember(agent, "Lin lives in Berlin")
    clock.advance(days=3)
    say(agent, "I moved to Paris last week!", "Exciting!")
    new = await remember(agent, "Lin moved to Paris in November 2026")
    planner.answer = {"contradictions": [{"winner": new, "losers": [old], "reason": "she moved"}]}

    result = await reflect(agent)

    assert result["changes"] == {"resolved": 1}
    assert [m.id for m in agent.archival.list()] == [new]
    kept = {m.id: m for m in agent.archival.list(include_superseded=True)}
    assert kept[old].superseded_by == new and kept[old].text == "Lin lives in Berlin"  # never deleted
    detail = agent.archival.history(old)[-1].detail
    assert (detail["reason"], detail["action"], detail["superseded_by"]) == ("she moved", "contradiction", new)
    hits = await agent.archival.search("where does Lin live", count_hits=False)
    assert old not in [h.id for h in hits]


async def test_an_insight_becomes_a_reflection_memory_with_its_sources(sqlite_url, clock):
    planner = Planner()
    agent = await load(sqlite_url, planner.model, clock)
    said = say(agent, "Exam tomorrow, I can't sleep.", "That sounds stressful.")
    a = await remember(agent, "Lin could not sleep before her chemistry exam", sources=[said[0].id])
    b = await remember(agent, "Lin felt sick before the physics exam in June", sources=[7])
    planner.answer = {"insights": [{"text": "Lin gets anxious before exams", "importance": 0.8, "source_ids": [a, b]}]}

    result = await reflect(agent)

    assert result["changes"] == {"insights": 1}
    [insight] = [m for m in agent.archival.list() if m.kind == "reflection"]
    assert insight.text == "Lin gets anxious before exams" and insight.importance == 0.8
    assert insight.source_message_ids == sorted([said[0].id, 7])
    [inserted] = agent.archival.history(insight.id)
    assert inserted.operation == "insert"
    assert inserted.detail["reason"] == "insight" and inserted.detail["reflection_id"] == result["reflection_id"]
    assert inserted.detail["source_ids"] == [a, b]


async def test_the_profile_patch_goes_through_the_block_edit_path(database_url, clock):
    planner = Planner({"profile": {"city": "Paris", "pets": {"cat": "Mochi"}, "name": None}})
    agent = await load(database_url, planner.model, clock)
    say(agent, "We moved to Paris with our cat Mochi.", "Welcome to Paris!")

    result = await reflect(agent)

    assert result["changes"] == {"profile": 1}
    assert json.loads(agent.memory.get("profile").value) == {"city": "Paris", "pets": {"cat": "Mochi"}}
    [edit] = agent.store.block_history(agent.record.id, "profile")
    assert edit.operation == f"reflection {result['reflection_id']}" and json.loads(edit.old_value) == PROFILE
    reloaded = await load(database_url, planner.model, clock)  # stored, not only in this process's copy
    assert json.loads(reloaded.memory.get("profile").value)["city"] == "Paris"


SCHEMA = {
    "type": "object",
    "additionalProperties": False,
    "properties": {"name": {"type": "string"}, "city": {"type": "string"}, "age": {"type": "integer"}},
}


async def test_a_structured_profile_is_patched_through_its_schema(sqlite_url, clock):
    spec = reflection_spec(profile=None)
    data = spec.model_dump(mode="json", by_alias=True, exclude_none=True)
    data["blocks"].append({"label": "profile", "value": json.dumps(PROFILE), "limit": 300, "schema": SCHEMA})
    planner = Planner({"profile": {"age": "thirty"}})
    agent = await load(sqlite_url, planner.model, clock, AgentSpec.model_validate(data))
    say(agent, "I turned thirty!", "Happy birthday!")
    before = state(agent)

    refused = await reflect(agent)

    assert Planner.payload(planner.requests[0])["profile_schema"] == SCHEMA
    assert refused["status"] == "invalid" and "age" in refused["error"] and state(agent) == before
    planner.answer = {"profile": {"age": 30, "city": None}}
    assert (await reflect(agent))["changes"] == {"profile": 1}
    assert json.loads(agent.memory.get("profile").value) == {"name": "Lin", "age": 30}


async def test_done_todos_are_superseded_by_a_progress_note(sqlite_url, clock):
    planner = Planner()
    agent = await load(sqlite_url, planner.model, clock)
    todo = await remember(agent, "Lin must renew her passport", kind="todo")
    say(agent, "Finally renewed my passport today.", "Well done!")
    planner.answer = {"done": [{"id": todo, "reason": "she renewed it"}]}

    result = await reflect(agent)

    assert result["changes"] == {"done": 1}
    [note] = agent.archival.list()
    assert note.kind == "progress" and note.text == "Done (2026-11-29): Lin must renew her passport"
    history = agent.archival.history(todo)[-1]
    assert history.detail["superseded_by"] == note.id and history.detail["action"] == "done"
    assert history.detail["reason"] == "she renewed it"


MALFORMED = [
    pytest.param("I think Lin is doing fine.", "no JSON", id="prose"),
    pytest.param('{"merges": [{"keep": "x"}]', "no JSON", id="truncated"),
    pytest.param('{"merges": [{"keep": "KEEP"}]}', "schema", id="partial"),
    pytest.param('["merges"]', "not an object", id="array"),
    pytest.param({"merges": [{"keep": "KEEP", "drop": ["nope"], "reason": "r"}]}, "unknown", id="unknown-id"),
    pytest.param(
        {
            "insights": [{"text": "x", "source_ids": ["nope"]}],
            "merges": [{"keep": "KEEP", "drop": ["DROP"], "reason": "r"}],
        },
        "unknown",
        id="unknown-source",
    ),
    pytest.param(
        {
            "merges": [{"keep": "KEEP", "drop": ["DROP"], "reason": "r"}],
            "contradictions": [{"winner": "DROP", "losers": ["KEEP"], "reason": "r"}],
        },
        "two roles",
        id="cycle",
    ),
    pytest.param({"done": [{"id": "KEEP", "reason": "r"}]}, "not todo", id="done-fact"),
    pytest.param(
        {"merges": [{"keep": "KEEP", "drop": ["DROP"], "reason": "r"}], "profile": {"bio": "x" * 400}},
        "limit",
        id="profile-over-limit",
    ),
]


@pytest.mark.parametrize("answer, error", MALFORMED)
async def test_malformed_or_partial_output_changes_nothing(sqlite_url, clock, answer, error):
    planner = Planner()
    agent = await load(sqlite_url, planner.model, clock)
    say(agent, "hello", "hi")
    keep, drop = await remember(agent, "Lin likes tea"), await remember(agent, "Lin drinks green tea daily")
    fill = lambda text: text.replace("KEEP", keep).replace("DROP", drop)  # noqa: E731
    planner.answer = fill(answer) if isinstance(answer, str) else json.loads(fill(json.dumps(answer)))
    before = state(agent)

    result = await reflect(agent)

    assert result["status"] == "invalid" and error in result["error"]
    assert state(agent) == before
    [row] = Journal(agent.store.engine, agent.record.id).all()
    assert row.status == "invalid" and error in row.error


async def test_a_profile_patch_on_a_block_that_is_not_json_is_refused(sqlite_url, clock):
    planner = Planner({"profile": {"city": "Paris"}})
    agent = await load(sqlite_url, planner.model, clock, reflection_spec(profile="Lin, lives in Berlin"))
    say(agent, "I live in Paris now.", "Noted!")
    before = state(agent)
    result = await reflect(agent)
    assert result["status"] == "invalid" and "JSON object" in result["error"]
    assert Planner.payload(planner.requests[0])["profile"] is None and state(agent) == before


async def test_json_in_prose_or_a_fence_is_found(sqlite_url, clock):
    planner = Planner()
    agent = await load(sqlite_url, planner.model, clock)
    say(agent, "hello", "hi")
    keep, drop = await remember(agent, "Lin likes tea"), await remember(agent, "Lin drinks green tea daily")
    plan = json.dumps({"merges": [{"keep": keep, "drop": [drop], "reason": "same"}]})
    planner.answer = f"Here is my reflection:\n```json\n{plan}\n```\nHope this helps."
    assert (await reflect(agent))["changes"] == {"merged": 1}


async def test_nothing_new_means_no_model_call(sqlite_url, clock):
    planner = Planner({})
    agent = await load(sqlite_url, planner.model, clock)
    assert (await reflect(agent))["status"] == "skipped" and planner.requests == []
    say(agent, "hello", "hi")
    assert (await reflect(agent))["changes"] == {}
    assert (await reflect(agent))["reason"] == "nothing new since the last reflection"
    assert len(planner.requests) == 1


async def test_the_request_stays_within_the_budget_dropping_the_oldest_messages(sqlite_url, clock):
    planner = Planner({})
    agent = await load(sqlite_url, planner.model, clock, reflection_spec(budget=2500))
    said = say(
        agent, *[f"Message number {n}: " + "we talked about the weather and the garden " * 5 for n in range(200)]
    )
    memory = await remember(agent, "Lin grows tomatoes")

    await reflect(agent)

    [request] = planner.requests
    tokens = (
        sum(count_tokens(m["content"]) for m in request.messages)
        + count_tokens(json.dumps(request.response_format))
        + 2 * TOKENS_PER_MESSAGE
        + TOKENS_REPLY_PRIMING
    )
    assert tokens <= 2500
    ids = [m["id"] for m in Planner.payload(request)["messages"]]
    assert 0 < len(ids) < len(said) and ids == [m.id for m in said[-len(ids) :]]  # the newest, in order
    assert [m["id"] for m in Planner.payload(request)["memories"]] == [memory]
    [row] = Journal(agent.store.engine, agent.record.id).all()
    assert row.last_message_id == said[-1].id  # covered: the next reflection starts after it


async def test_a_rejected_response_format_is_retried_once_without_it(sqlite_url, clock, scripted_openai):
    agent = await load(sqlite_url, scripted_openai.client(), clock)
    say(agent, "hello", "hi")
    keep, drop = await remember(agent, "Lin likes tea"), await remember(agent, "Lin drinks green tea daily")
    plan = {"merges": [{"keep": keep, "drop": [drop], "reason": "same"}]}
    scripted_openai.add(
        http_error(400, "Invalid parameter: 'response_format' of type 'json_schema' is not supported with this model."),
        reply_body(f"```json\n{json.dumps(plan)}\n```"),
    )

    result = await reflect(agent)

    assert result["changes"] == {"merged": 1}
    first, second = scripted_openai.requests
    assert first["response_format"]["type"] == "json_schema" and "response_format" not in second
    assert first["messages"] == second["messages"]


async def test_another_rejection_is_not_retried_and_changes_nothing(sqlite_url, clock, scripted_openai):
    agent = await load(sqlite_url, scripted_openai.client(), clock)
    say(agent, "hello", "hi")
    scripted_openai.add(http_error(400, "Invalid 'messages[1].content'"))
    result = await reflect(agent)
    assert result["status"] == "failed" and "HTTP 400" in result["error"]
    assert len(scripted_openai.requests) == 1


async def test_a_rerun_after_the_plan_was_applied_but_not_marked_done_applies_nothing_twice(database_url, clock):
    planner = Planner()
    agent = await load(database_url, planner.model, clock)
    say(agent, "Passport renewed! And Mei says hi.", "Great news!")
    keep, drop = await remember(agent, "Lin's sister is Mei"), await remember(agent, "Lin has a sister, Mei")
    todo = await remember(agent, "Lin must renew her passport", kind="todo")
    planner.answer = {
        "merges": [{"keep": keep, "drop": [drop], "reason": "same"}],
        "insights": [{"text": "Lin is close to her sister Mei"}],
        "done": [{"id": todo, "reason": "renewed"}],
        "profile": {"sister": "Mei"},
    }
    first = await reflect(agent)
    after = state(agent)
    journal = Journal(agent.store.engine, agent.record.id)
    # As if the process died after the last change and before the row said done: the plan is still stored.
    journal.plan(first["reflection_id"], ReflectionOutput.model_validate(planner.answer).model_dump(mode="json"))
    clock.advance(hours=1)

    again = await reflect(agent)

    assert again["resumed"] and again["reflection_id"] == first["reflection_id"] and again["changes"] == {}
    assert len(planner.requests) == 1  # the stored plan, not a new answer
    assert state(agent) == after
    assert [r.status for r in journal.all()] == ["done"]


async def test_every_turns_says_when_a_reflection_is_due(sqlite_url, clock):
    agent = await load(sqlite_url, Planner({}).model, clock, reflection_spec(every_turns=2))
    say(agent, "one", "ok")
    assert due_reflection(agent) is None
    say(agent, "two", "ok")
    key = due_reflection(agent)
    assert key == "reflect:after:start"
    await reflect(agent)
    assert due_reflection(agent) is None
    say(agent, "three", "ok", "four", "ok")
    assert due_reflection(agent) not in (None, key)  # a new key: the next job is not taken for the last one
    off = await load(sqlite_url, Planner({}).model, clock, reflection_spec(every_turns=0))
    assert due_reflection(off) is None


async def test_a_second_reflection_reads_only_what_came_after_the_first(database_url, clock):
    planner = Planner({})
    agent = await load(database_url, planner.model, clock)
    say(agent, "first", "ok")
    await remember(agent, "Lin likes tea")
    await reflect(agent)
    clock.advance(days=1)
    later = say(agent, "second", "ok")
    new = await remember(agent, "Lin started a pottery class")
    await reflect(agent)
    payload = Planner.payload(planner.requests[-1])
    assert [m["id"] for m in payload["messages"]] == [m.id for m in later]
    assert payload["memories"][0]["id"] == new  # touched since the last reflection: first; neighbours after


def test_the_reflection_section_leaves_existing_fingerprints_alone():
    from pagemind.runtime.testing.specs import build_spec

    plain = build_spec()
    assert build_spec(memory={"reflection": {}}).spec_hash() == plain.spec_hash()  # defaults: as before the section
    assert build_spec(memory={"reflection": {"every_turns": 3}}).spec_hash() != plain.spec_hash()
