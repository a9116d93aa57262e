"""bench.lifecycle: its generated history and ground truth, its scripted models, and the report's fields
computed over a few simulated days with the real runtime (timings are not checked)."""

from __future__ import annotations

import json
from datetime import timedelta
from itertools import pairwise

import pytest

from bench.lifecycle import live_records, mentions, score, simulate, turn_text
from bench.lifecycle_data import CHAT, START, Correction, Day, FactTruth, History, Plan, Turn, generate
from bench.lifecycle_models import memory_of, reflect_answer, salience_answer
from bench.lifecycle_report import report
from pagemind.runtime.agent import Agent
from pagemind.runtime.model.client import ModelRequest


def test_the_history_is_seeded_and_its_ground_truth_matches_its_turns():
    history = generate(seed=3, days=10, turns_per_day=6)
    assert generate(seed=3, days=10, turns_per_day=6) == history
    assert generate(seed=4, days=10, turns_per_day=6) != history
    assert [d.number for d in history.days] == list(range(1, 11))
    planted = [(d.number, t) for d in history.days for t in d.turns if t.kind != "chat"]
    for fact in history.facts.values():  # every value the user stated is said on its day, in order
        said = [(day, t.text) for day, t in planted if t.ref == fact.slot]
        assert [day for day, _ in said] == [day for day, _ in fact.values]
        assert all(mentions(text, value) for (_, text), (_, value) in zip(said, fact.values, strict=True))
    for c in history.corrections:
        values = [v for _, v in history.facts[c.slot].values]
        assert values.index(c.new) == values.index(c.old) + 1
    for plan in history.plans:
        day = history.days[plan.day - 1]
        assert any(t.ref == plan.id and t.text == plan.text for t in day.turns)
        assert plan.ends >= day.date
    assert all(t.at.date() == d.date for d in history.days for t in d.turns)
    assert all(a.at < b.at for d in history.days for a, b in pairwise(d.turns))


def test_the_companion_files_facts_and_plans_and_skips_chit_chat():
    history = generate(seed=7, days=90, turns_per_day=6)
    assert all(memory_of(text) is None for text in CHAT)
    for turn in (t for d in history.days for t in d.turns if t.kind != "chat"):
        found = memory_of(turn.text)
        assert found is not None, turn.text
        assert found[1] == ("todo" if turn.kind == "plan" else "fact"), turn.text
    assert memory_of("I'm allergic to peanuts.") == ("The user is allergic to peanuts.", "fact")
    assert memory_of("下周数学考试，有点紧张。") == ("用户下周数学考试，有点紧张。", "todo")


def test_the_small_salience_model_says_worth_it_for_what_the_companion_would_file():
    def verdict(text: str) -> dict:
        request = ModelRequest(
            "m", [{"role": "user", "content": json.dumps({"user": text})}], [], 0.0, 20, purpose="salience"
        )
        return json.loads(salience_answer(request)["choices"][0]["message"]["content"])

    assert verdict("I joined Globex.") == {"remember": True, "lookup": True}
    assert verdict("the weather is lovely today") == {"remember": False, "lookup": False}
    asked = ModelRequest(
        "m", [{"role": "user", "content": json.dumps({"user": "嗯嗯"})}], [], 0.0, 20, purpose="salience"
    )
    assert turn_text(asked) == "嗯嗯"  # how the report tells a salience call on chit-chat
    assert turn_text(ModelRequest("m", [{"role": "user", "content": "not json"}], [], 0.0, 20)) == ""


def _reflection(now: str, memories: list[dict]) -> ModelRequest:
    payload = {"now": now, "messages": [], "memories": memories, "profile": None, "profile_schema": None}
    messages = [{"role": "system", "content": "Reflect."}, {"role": "user", "content": json.dumps(payload)}]
    return ModelRequest("m", messages, [], 0.0, 500, purpose="reflect")


def _memory(memory_id: str, kind: str, day: int, text: str) -> dict:
    return {"id": memory_id, "kind": kind, "at": f"2026-01-{day:02d}T09:00:00+00:00", "text": text, "importance": 0.5}


def test_the_reflector_lets_the_newer_statement_win_merges_copies_and_closes_past_todos():
    memories = [
        _memory("a", "fact", 5, "The user lives in Lisbon."),
        _memory("b", "fact", 20, "The user moved to Berlin."),
        _memory("c", "fact", 6, "The user's sister is called Mei."),
        _memory("d", "fact", 7, "The user's sister is called Mei!"),
        _memory("e", "todo", 7, "Dentist tomorrow (2026-01-08)."),
        _memory("f", "todo", 20, "Dentist tomorrow (2026-01-21)."),
    ]
    body = reflect_answer(_reflection("2026-01-20T23:00:00+00:00", memories))
    output = json.loads(body["choices"][0]["message"]["content"])
    assert output["merges"] == [{"keep": "d", "drop": ["c"], "reason": "near-duplicate text"}]
    assert output["contradictions"] == [
        {"winner": "b", "losers": ["a"], "reason": "newer statement about the user's home"}
    ]
    assert [d["id"] for d in output["done"]] == ["e"]
    assert (
        json.loads(
            reflect_answer(ModelRequest("m", [{"role": "user", "content": "not json"}], [], 0.0, 9))["choices"][0][
                "message"
            ]["content"]
        )["contradictions"]
        == []
    )


def _tiny_history() -> History:
    at = START + timedelta(hours=9)
    plan = Plan(
        "plan1",
        1,
        "I have a dentist appointment with Dr. Lee tomorrow.",
        "Lee",
        "dentist appointment with Dr. Lee",
        (START + timedelta(days=1)).date(),
    )
    days = [
        Day(
            1,
            START.date(),
            [
                Turn(at, "good morning"),
                Turn(at + timedelta(hours=1), "I live in Lisbon.", "fact", "city"),
                Turn(at + timedelta(hours=2), plan.text, "plan", plan.id),
                Turn(at + timedelta(hours=3), "My sister's name is Mei.", "fact", "sister"),
            ],
        ),
        Day(
            2,
            (START + timedelta(days=1)).date(),
            [
                Turn(at + timedelta(days=1), "Actually I moved to Berlin last month.", "correction", "city"),
                Turn(at + timedelta(days=1, hours=1), "嗯嗯"),
            ],
        ),
        Day(3, (START + timedelta(days=2)).date(), [Turn(at + timedelta(days=2), "haha")]),
    ]
    facts = {
        "city": FactTruth("city", "Which city does the user live in?", [(1, "Lisbon"), (2, "Berlin")]),
        "sister": FactTruth("sister", "What is the user's sister's name?", [(1, "Mei")]),
    }
    return History(1, 2, days, facts, [Correction("city", 2, "Lisbon", "Berlin")], [plan])


async def _stand_in_reflection(agent: Agent) -> None:
    """A reflection stand-in: the contract's request through the agent's model; losers forgotten."""
    memories = [
        {"id": r.id, "kind": r.kind, "at": r.created_at.isoformat(), "text": r.text, "importance": r.importance}
        for r in agent.archival.list()
    ]
    request = _reflection(agent.now().isoformat(), memories)
    output = json.loads((await agent.call_model(request, 0)).content)
    for resolution in output["contradictions"]:
        for loser in resolution["losers"]:
            await agent.archival.forget(loser)


async def _stand_in_episode(agent: Agent) -> dict:
    """An episodes stand-in: the day as an episode memory that names what was said; its fading step fails on
    day 2 (reported in the result, as a part may, not raised)."""
    text = f"Episode of {agent.now():%Y-%m-%d}: the user said they live in Lisbon; dentist appointment with Dr. Lee."
    await agent.archival.insert(text, kind="episode")
    return {"error": "fading failed"} if agent.now().day == START.day + 1 else {"status": "stored"}


@pytest.mark.parametrize("reflection", [False, True])
async def test_the_report_counts_what_the_simulated_days_left(tmp_path, reflection):
    history = _tiny_history()
    steps = {"episodes": _stand_in_episode, "reflection": _stand_in_reflection} if reflection else {}
    run = await simulate(history, tmp_path, "on" if reflection else "off", steps)
    result = await score(run, history)

    assert result["turns"] == 7 and run.session_errors == (["episodes: fading failed"] if reflection else [])
    assert result["session_status"] == (
        {"episodes": {"stored": 2, "error": 1}, "reflection": {"ok": 3}} if reflection else {}
    )
    assert set(result["tokens_by_day"]) == {1, 3}
    assert len(run.tokens_by_day[1]) == 4 and min(run.tokens_by_day[1]) > 500  # system prompt and tools at least
    now = run.agent.now()
    live = live_records(run, now)
    assert result["live"] == len(live) and result["live_by_kind"]["fact"] == (2 if reflection else 3)
    assert ("episode" in result["live_by_kind"]) == reflection  # (the write path refreshes near-copies)
    # an episode naming Lisbon is a record of what was said, not the stale fact
    assert (result["contradictions_live"], result["corrections"]) == ((0 if reflection else 1), 1)
    assert (result["facts_found"], result["facts"]) == (2, 2)
    assert result["corrected_facts"] == 1 and result["stale_first"] in ((0,) if reflection else (0, 1))
    plan_memory = next(r for r in run.agent.archival.list(include_superseded=True) if r.kind == "todo")
    assert result["expired_plans"] == 1
    hidden = bool(plan_memory.expires_at and plan_memory.expires_at < now)
    assert result["expired_plans_shown"] == (0 if hidden else 1)
    assert result["expired_plans_in_episodes"] == (1 if hidden and reflection else 0)
    assert result["reflection_calls_per_100"] == pytest.approx(300 / 7 if reflection else 0.0)
    assert result["calls_per_100"]["step"] == pytest.approx(100 * 11 / 7, abs=0.05)  # 7 replies, 4 inserts
    text = report(history, {"run": result}, {"reflection": _stand_in_reflection if reflection else None}, "a note")
    assert ("reflection: available" if reflection else "reflection: not available") in text
    row = "| planted contradictions still both live (target 0 with reflection) |"
    assert f"{row} {0 if reflection else 1} of 1 |" in text


async def test_two_days_of_the_quick_history_score_what_they_planted(tmp_path):
    history = generate(seed=7, days=10, turns_per_day=12).first(2)
    assert history.facts and history.corrections  # this seed plants facts and corrects one within two days
    run = await simulate(history, tmp_path, "off", {})
    result = await score(run, history)

    assert result["turns"] == history.turn_count == sum(len(v) for v in run.tokens_by_day.values())
    assert set(result["tokens_by_day"]) == {1, 2}
    assert (result["facts_found"], result["facts"]) == (len(history.facts), len(history.facts))
    assert result["contradictions_live"] == len(history.corrections)  # nothing resolves them with reflection off
    assert result["live_by_kind"]["fact"] == sum(len(t.values) for t in history.facts.values())
