"""The end of a session: an idle trigger's job first turns the session into an episode and clears the ephemeral
blocks, then runs (`reflect`); the same job queued by `every_turns` ends nothing; a failing step stops no other."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml

from pagemind.runtime.model.client import ModelError
from pagemind.runtime.process.settings import Settings
from pagemind.runtime.reflection.journal import Journal
from pagemind.runtime.session_end import close_session
from pagemind.runtime.spec.agent import AgentSpec
from pagemind.runtime.spec.loading import load_spec
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.clock import ManualClock
from pagemind.runtime.testing.models import FunctionModel, by_purpose
from pagemind.runtime.testing.responses import reply_body, tool_call_body
from pagemind.runtime.testing.specs import spec_data
from pagemind.scheduler.catalog import AgentCatalog
from pagemind.scheduler.daemon import Daemon

TOOLS = ["send_message", "core_memory_append", "core_memory_replace", "archival_memory_insert", "archival_search"]
SESSION_SEED = "(nothing yet)"
INSIGHT = "Lin is anxious before exams"


def agent_yaml(folder: Path, **fields: Any) -> None:
    data = spec_data("lin", tools=TOOLS, human_limit=2000, context_window=16000, **fields)
    data["blocks"].append(
        {
            "label": "session",
            "value": SESSION_SEED,
            "limit": 500,
            "ephemeral": True,
            "description": "Notes for this conversation only.",
        }
    )
    path = folder / "lin.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    load_spec(path)


def step(request) -> dict:
    """Note the topic in the session block, then reply."""
    if any(m["role"] == "tool" for m in request.messages[-2:]):
        return tool_call_body("send_message", {"message": "Good luck!"})
    return tool_call_body("core_memory_append", {"label": "session", "content": "talked about the exam"})


def reflect_plan(request) -> dict:
    return reply_body(json.dumps({"insights": [{"text": INSIGHT, "importance": 0.7}]}))


def model(summary: str = "Lin talked about her chemistry exam on Friday and felt nervous.") -> FunctionModel:
    respond = by_purpose(step, summarize=summary)
    return FunctionModel(lambda request: reflect_plan(request) if request.purpose == "reflect" else respond(request))


@pytest.fixture
def daemon_for(database_url, tmp_path):
    made: list[Daemon] = []

    def make(clock: ManualClock, fn: FunctionModel) -> Daemon:
        store = StateStore(make_engine(database_url))
        daemon = Daemon(
            AgentCatalog(tmp_path / "agents", store),
            Settings(home=tmp_path / "home", database_url=database_url),
            clock=clock,
            model=fn,
        )
        made.append(daemon)
        return daemon

    (tmp_path / "agents").mkdir()
    yield make
    for daemon in made:
        daemon.store.engine.dispose()


async def talk(daemon: Daemon) -> None:
    for text in (
        "I have my chemistry exam on Friday and I'm really nervous about it.",
        "I studied all weekend but organic chemistry still confuses me.",
    ):
        assert (await daemon.wait((await daemon.submit("lin", text)).run_id, 30)).state == "done"


async def test_an_idle_reflect_ends_the_session_then_reflects(daemon_for, tmp_path):
    agent_yaml(tmp_path / "agents", idle={"after": "15m", "run": "reflect"})
    clock = ManualClock(datetime.now(UTC))  # the inbox stamps times by the wall clock
    daemon = daemon_for(clock, model())
    await daemon.start()
    try:
        await talk(daemon)
        async with daemon.agent("lin") as agent:
            assert "talked about the exam" in agent.memory.get("session").value
        clock.now = clock() + timedelta(minutes=16)
        await daemon.tick(clock())
        job = daemon.inbox.items(daemon.catalog.agent_id("lin"))[-1]
        done = await daemon.wait(job.run_id, 60)
    finally:
        await daemon.stop()
    assert (job.kind, job.content, done.state) == ("job", "reflect", "done"), done
    assert done.result["session"]["episodes"]["episodes"] == 1
    assert done.result["session"]["ephemeral"]["cleared"] == ["session"]
    assert done.result["status"] == "done" and done.result["changes"] == {"insights": 1}
    async with daemon.agent("lin") as agent:
        assert agent.memory.get("session").value == SESSION_SEED
        kinds = sorted((m.kind, m.text) for m in agent.archival.list())
        assert [k for k, _ in kinds] == ["episode", "reflection"] and kinds[1][1] == INSIGHT
        assert "chemistry exam" in kinds[0][1]


async def test_a_reflect_queued_by_every_turns_ends_no_session(daemon_for, tmp_path):
    agent_yaml(tmp_path / "agents", memory={"reflection": {"every_turns": 2}})
    daemon = daemon_for(ManualClock(datetime.now(UTC)), model())
    await daemon.start()
    try:
        await talk(daemon)
        for item in daemon.inbox.items():
            await daemon.wait(item.run_id, 60)
    finally:
        await daemon.stop()
    job = daemon.inbox.items()[-1]
    assert (job.content, job.state, "session" in job.result) == ("reflect", "done", False)
    async with daemon.agent("lin") as agent:
        assert "talked about the exam" in agent.memory.get("session").value  # the session goes on
        assert [m.kind for m in agent.archival.list()] == ["reflection"]  # no episode mid-session


async def test_a_failing_step_is_reported_and_the_others_still_run(make_agent, database_url):
    def summarizer_down(request):
        raise ModelError("summarizer unavailable")

    respond = by_purpose(step, summarize=summarizer_down)
    fn = FunctionModel(lambda request: reflect_plan(request) if request.purpose == "reflect" else respond(request))
    data = spec_data("lin", tools=TOOLS, human_limit=2000, context_window=16000)
    data["blocks"].append({"label": "session", "value": SESSION_SEED, "limit": 500, "ephemeral": True})
    agent = await make_agent(database_url, fn, AgentSpec.model_validate(data))
    await agent.send("I have my chemistry exam on Friday and I'm really nervous about it, honestly.")
    result = await close_session(agent)
    assert result["error"].startswith("episodes: ") and "could not become an episode" in result["error"]
    assert result["ephemeral"]["cleared"] == ["session"] and result["reflection"]["status"] == "done"
    assert agent.memory.get("session").value == SESSION_SEED
    assert [m.kind for m in agent.archival.list()] == ["reflection"]
    rows = Journal(agent.store.engine, agent.record.id).all()
    assert [r.status for r in rows] == ["done"]
