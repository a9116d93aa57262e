"""Reflection from the command line: `pagemind reflect` prints what changed, `pagemind run` reflects after the turn
that makes one due (`memory.reflection.every_turns`), `memory archival --history` shows each change's reason and
reflection id. The CLI runs in a thread of the test (it has its own event loop) against a scripted endpoint."""

from __future__ import annotations

import asyncio
import json

from pagemind.runtime.cli.main import main
from pagemind.runtime.reflection.journal import Journal
from pagemind.runtime.reflection.run import reflect
from pagemind.runtime.testing.endpoint import BASE_URL, TEST_API_KEY
from pagemind.runtime.testing.responses import reply_body, tool_call_body
from tests.runtime.reflection.test_reflection import Planner, load, reflection_spec, remember, say


def endpoint(monkeypatch, url: str) -> None:
    """The CLI's database and model endpoint (the scripted one)."""
    for name, value in {"DATABASE_URL": url, "OPENAI_BASE_URL": BASE_URL, "OPENAI_API_KEY": TEST_API_KEY}.items():
        monkeypatch.setenv(name, value)


async def cli(argv: list[str]) -> int:
    """The CLI runs its own event loop: run it beside the test's."""
    return await asyncio.to_thread(main, argv)


async def test_changes_carry_the_reason_in_the_cli_history(sqlite_url, clock, capsys, monkeypatch):
    planner = Planner()
    agent = await load(sqlite_url, planner.model, clock)
    say(agent, "hello", "hi")
    keep, drop = await remember(agent, "Lin likes tea"), await remember(agent, "Lin drinks green tea daily")
    planner.answer = {"merges": [{"keep": keep, "drop": [drop], "reason": "both about tea"}]}
    result = await reflect(agent)
    endpoint(monkeypatch, sqlite_url)
    capsys.readouterr()
    assert await cli(["memory", "archival", agent.name, "--history", drop[:8]]) == 0
    shown = capsys.readouterr().out
    assert "superseded" in shown and "both about tea" in shown and result["reflection_id"] in shown


async def test_the_cli_reflects_and_prints_a_summary(sqlite_url, clock, scripted_openai, capsys, monkeypatch):
    agent = await load(sqlite_url, Planner().model, clock)
    say(agent, "hello", "hi")
    keep, drop = await remember(agent, "Lin likes tea"), await remember(agent, "Lin drinks green tea daily")
    plan = {"merges": [{"keep": keep, "drop": [drop], "reason": "same"}], "profile": {"city": "Paris"}}
    scripted_openai.add(reply_body(json.dumps(plan)), reply_body("not a plan"))
    endpoint(monkeypatch, sqlite_url)
    capsys.readouterr()

    assert await cli(["reflect", agent.name]) == 0
    [row] = Journal(agent.store.engine, agent.record.id).all()
    assert capsys.readouterr().out == f"reflection {row.id[:8]}: 1 merged, profile updated\n"
    say(agent, "more", "sure")
    assert await cli(["reflect", agent.name]) == 1
    assert capsys.readouterr().out.startswith("reflection invalid: no JSON object")


async def test_pagemind_run_reflects_after_the_turn_that_makes_one_due(
    sqlite_url, clock, scripted_openai, capsys, monkeypatch
):
    agent = await load(sqlite_url, Planner().model, clock, reflection_spec(every_turns=1))
    scripted_openai.add(tool_call_body("send_message", {"message": "Hello Lin!"}), reply_body("{}"))
    endpoint(monkeypatch, sqlite_url)
    capsys.readouterr()
    assert await cli(["run", agent.name, "-m", "Hi, I'm Lin."]) == 0
    assert capsys.readouterr().out == "Hello Lin!\n"  # stdout holds the reply alone
    assert [r["messages"][0]["role"] for r in scripted_openai.requests] == ["system", "system"]
    assert "response_format" in scripted_openai.requests[1]
    [row] = Journal(agent.store.engine, agent.record.id).all()
    assert row.status == "done" and row.last_message_id == agent.store.last_message_id(agent.record.id)


async def test_the_cli_ends_the_session_before_reflecting(sqlite_url, clock, scripted_openai, capsys, monkeypatch):
    agent = await load(sqlite_url, Planner().model, clock)
    say(agent, "My chemistry exam is on Friday and I am nervous about the organic part.", "You will do well.")
    scripted_openai.add(
        reply_body("Lin is nervous about Friday's chemistry exam."),  # the episode's summary
        reply_body(json.dumps({"insights": [{"text": "Lin gets anxious before exams"}]})),
    )
    endpoint(monkeypatch, sqlite_url)
    capsys.readouterr()
    assert await cli(["reflect", agent.name, "--end-session"]) == 0
    [row] = Journal(agent.store.engine, agent.record.id).all()
    assert capsys.readouterr().out == (
        f"session ended: episodes 1 new, 0 faded; ephemeral blocks cleared: none\nreflection {row.id[:8]}: 1 insights\n"
    )
    assert sorted(m.kind for m in agent.archival.list()) == ["episode", "reflection"]
