"""Episodes (issue 13, item 4): each ended session becomes one `episode` memory, dated at its start; episodes fade
with age (7 days → 256 tokens, 30 days → 64) in place, with a `faded` version; recall keeps the full text.

Agents run under a ManualClock with a scripted summarizer; archival memory is the embedded Qdrant store with a
fake embedder. The crash tests kill a child (tests/support/episodes_crash_child.py, forked from a forkserver as in
tests/crash/test_archival_crash.py) at each step of making and fading an episode, then rerun the job and check that SQL
and the store agree and that nothing was made or faded twice.
"""

from __future__ import annotations

import asyncio
import json
import multiprocessing
import re
import signal
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pagemind.runtime.agent import Agent
from pagemind.runtime.memory.archival.memory import ArchivalService
from pagemind.runtime.memory.episodes import (
    end_session,
    episode_id,
    fade_episodes,
    split_sessions,
    user_words,
    within_tokens,
)
from pagemind.runtime.memory.vectors.edge import EdgeBackend
from pagemind.runtime.memory.vectors.server import ServerBackend
from pagemind.runtime.messages import Message
from pagemind.runtime.model.client import ModelError, ModelRequest
from pagemind.runtime.process.settings import Settings
from pagemind.runtime.spec.agent import AgentSpec
from pagemind.runtime.spec.memory import EpisodesConfig
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.clock import ManualClock
from pagemind.runtime.testing.embedder import FakeEmbedder
from pagemind.runtime.testing.models import FunctionModel, by_purpose
from pagemind.runtime.testing.responses import reply_body
from pagemind.runtime.testing.specs import spec_data
from pagemind.runtime.tokens import count_tokens
from pagemind.tools import BUILTIN_TOOLS, ToolCall, dispatch_tool_calls

T0 = datetime(2026, 11, 2, 9, 0, tzinfo=UTC)
SPEC = AgentSpec.model_validate(
    {
        **spec_data("episodic"),
        "memory": {"prefetch_top_k": 0},
        "tools": ["send_message", "conversation_search", "archival_memory_insert", "archival_search"],
    }
)
RECITAL = [
    ("user", "I have my cello recital on Saturday and I am nervous about the Bach suite"),
    ("assistant", "You have practised a lot; which movement worries you most?"),
    ("user", "The sarabande, my teacher Mrs Okafor says I rush the slow bars"),
    ("assistant", "Try counting the slow bars out loud tonight."),
]
CHIT_CHAT = [("user", "ok"), ("assistant", "Anything else?"), ("user", "haha 嗯嗯"), ("assistant", "Good night!")]
MOVE = [
    ("user", "We signed the lease for the flat in Lyon today, moving on the first of March"),
    ("assistant", "Congratulations on the new flat!"),
]
LONG_EPISODE = "Lin prepared for her cello recital and worried about rushing the sarabande. " * 30
FADED_256 = "Recital worry, sarabande tempo, teacher Okafor advice, counting aloud. " * 30  # over 256 tokens
FADED_64 = "Lin was nervous before her cello recital."


def summarizer(request: ModelRequest) -> dict[str, Any]:
    """The scripted summarizer: a long episode for a session, a fixed shorter text when asked to fade one."""
    if "getting old" in request.messages[0]["content"]:
        return reply_body(FADED_256 if request.max_tokens >= 256 else FADED_64)
    users = re.findall(r"\] user: (.*)", request.messages[1]["content"])
    return reply_body(LONG_EPISODE if "cello" in " ".join(users) else "Lin: " + " / ".join(users))


def no_steps(request: ModelRequest) -> dict[str, Any]:
    raise AssertionError("the session-end job makes no agent step")


@pytest.fixture
def world(tmp_path):
    """(load, backend): `load(url, clock, respond)` gives the agent over `url` with archival memory in tmp_path."""
    backend = EdgeBackend(tmp_path / "shard", FakeEmbedder.dim)

    async def load(url: str, clock: ManualClock, respond=None, spec: AgentSpec = SPEC) -> Agent:
        return await load_agent(
            url, tmp_path, clock, backend, respond or by_purpose(no_steps, summarize=summarizer), spec
        )

    yield load, backend
    backend.close()


async def load_agent(
    url: str, home: Path, clock: ManualClock, backend: EdgeBackend, respond, spec: AgentSpec = SPEC
) -> Agent:
    """The agent over `url`, its archival memory in `backend` (fake embedder), recall by keywords."""
    store = StateStore(make_engine(url))
    agent = await Agent.load(
        spec, model=FunctionModel(respond), store=store, settings=Settings(home=home, database_url=url), clock=clock
    )
    agent.archival = ArchivalService(
        agent.record.id,
        engine=store.engine,
        open_backend=lambda: backend,
        embedder=FakeEmbedder(),
        config=spec.memory.archival,
        clock=clock,
    )
    agent.recall.embedder = None
    return agent


def say(agent: Agent, start: datetime, lines: list[tuple[str, str]]) -> list[Message]:
    """Store a conversation, one message a minute from `start`."""
    return agent.store.append_messages(
        agent.record.id, [Message(role, text, start + timedelta(minutes=n)) for n, (role, text) in enumerate(lines)]
    )


def with_episode(world, url: str, lines: list[tuple[str, str]]) -> tuple[Agent, ManualClock]:
    """An agent whose one session (`lines`, from T0) has just become an episode, and its clock (an hour later)."""
    load, _ = world
    clock = ManualClock(T0 + timedelta(hours=1))
    agent = run(load(url, clock))
    say(agent, T0, lines)
    run(end_session(agent))
    return agent, clock


def episodes(agent: Agent) -> list[Any]:
    return [m for m in agent.archival.list(include_superseded=True) if m.kind == "episode"]


def summarizer_calls(agent: Agent) -> int:
    return sum(1 for r in agent.model.requests if r.purpose == "summarize")


def run(coro):
    return asyncio.run(coro)


# -- sessions become episodes ------------------------------------------------------------------------------------


def test_a_session_becomes_one_episode_dated_at_its_start_and_a_rerun_makes_none(world, database_url):
    load, _ = world
    clock = ManualClock(T0 + timedelta(hours=1))
    agent = run(load(database_url, clock))
    said = say(agent, T0, RECITAL)
    done = run(end_session(agent))
    assert done["episodes"] == 1 and done["sessions"] == 1
    [episode] = episodes(agent)
    assert episode.id == episode_id(agent.record.id, said[0].id) == done["episode_ids"][0]
    assert episode.created_at == T0 and episode.source_message_ids == [m.id for m in said]
    assert episode.text == LONG_EPISODE.strip()
    [insert] = agent.archival.history(episode.id)
    assert insert.operation == "insert" and insert.detail["session_start"] == T0.isoformat()
    assert insert.detail["session_end"] == (T0 + timedelta(minutes=3)).isoformat()
    # The summarizer saw the whole session, with dates.
    [request] = [r for r in agent.model.requests if r.purpose == "summarize"]
    assert "[2026-11-02 09:02] user: The sarabande" in request.messages[1]["content"]

    again = run(end_session(agent))
    assert again["episodes"] == 0 and again["sessions"] == 0 and len(episodes(agent)) == 1
    assert summarizer_calls(agent) == 1


def test_the_episode_is_found_by_a_search_over_its_dates_and_not_outside_them(world, sqlite_url):
    load, _ = world
    agent = run(load(sqlite_url, ManualClock(T0 + timedelta(hours=1))))
    say(agent, T0, RECITAL)
    run(end_session(agent))
    day = T0.replace(hour=0)
    inside = run(agent.archival.search("cello recital", start_date=day, end_date=day + timedelta(days=1)))
    assert [h.kind for h in inside] == ["episode"] and inside[0].date == T0
    assert (
        run(
            agent.archival.search("cello recital", start_date=day + timedelta(days=1), end_date=day + timedelta(days=8))
        )
        == []
    )


def test_sessions_are_split_by_the_gap_and_chit_chat_makes_no_episode(world, sqlite_url):
    load, _ = world
    agent = run(load(sqlite_url, ManualClock(T0 + timedelta(days=1))))
    recital = say(agent, T0, RECITAL)
    say(agent, T0 + timedelta(hours=7), CHIT_CHAT)  # more than recall_session_gap_hours (6) later
    move = say(agent, T0 + timedelta(hours=14), MOVE)
    done = run(end_session(agent))
    assert (done["sessions"], done["episodes"], done["chit_chat"]) == (3, 2, 1)
    made = {m.id: m for m in episodes(agent)}
    assert set(made) == {episode_id(agent.record.id, recital[0].id), episode_id(agent.record.id, move[0].id)}
    moved = made[episode_id(agent.record.id, move[0].id)]
    assert moved.source_message_ids == [m.id for m in move] and "lease for the flat in Lyon" in moved.text
    assert run(end_session(agent))["episodes"] == 0 and summarizer_calls(agent) == 2


def test_a_later_session_gets_its_own_episode(world, sqlite_url):
    agent, clock = with_episode(world, sqlite_url, RECITAL)
    clock.advance(hours=2)  # the user comes back within the gap: what follows the episode is a new one
    move = say(agent, clock.now, MOVE)
    clock.advance(minutes=30)
    assert run(end_session(agent))["episodes"] == 1
    [later] = [m for m in episodes(agent) if m.created_at == move[0].created_at]
    assert later.source_message_ids == [m.id for m in move]


def test_chit_chat_waits_and_joins_the_session_it_turns_into(world, sqlite_url):
    load, _ = world
    clock = ManualClock(T0 + timedelta(minutes=20))
    agent = run(load(sqlite_url, clock))
    chat = say(agent, T0, CHIT_CHAT)
    assert run(end_session(agent))["episodes"] == 0 and summarizer_calls(agent) == 0
    move = say(agent, T0 + timedelta(hours=1), MOVE)
    assert run(end_session(agent))["episodes"] == 1
    [episode] = episodes(agent)
    assert episode.created_at == T0 and episode.source_message_ids == [m.id for m in chat + move]


def test_word_counting_and_session_splitting():
    assert user_words([Message("user", "ok haha 嗯嗯", T0), Message("assistant", "many words here", T0)]) == 4
    assert user_words([Message("user", "我下周要搬家了", T0)]) == 7
    at = [T0, T0 + timedelta(hours=5), T0 + timedelta(hours=11, minutes=1), T0 + timedelta(hours=12)]
    sessions = split_sessions([Message("user", "x", t) for t in at], timedelta(hours=6))
    assert [len(s) for s in sessions] == [2, 2]


def test_a_failed_summary_makes_nothing_and_the_next_run_makes_it(world, sqlite_url):
    load, _ = world
    clock = ManualClock(T0 + timedelta(hours=1))

    def broken(request: ModelRequest):
        raise ModelError("the summarizer is down")

    agent = run(load(sqlite_url, clock, by_purpose(no_steps, summarize=broken)))
    say(agent, T0, RECITAL)
    assert run(end_session(agent))["episodes"] == 0 and episodes(agent) == []
    agent.model_override = FunctionModel(by_purpose(no_steps, summarize=summarizer))
    assert run(end_session(agent))["episodes"] == 1


def test_disabled_episodes_do_nothing(world, sqlite_url):
    load, _ = world
    spec = AgentSpec.model_validate({**SPEC.model_dump(), "memory": {"episodes": {"enabled": False}}})
    agent = run(load(sqlite_url, ManualClock(T0 + timedelta(hours=1)), spec=spec))
    say(agent, T0, RECITAL)
    assert run(end_session(agent))["episodes"] == 0 and episodes(agent) == [] and agent.model.requests == []


def test_at_most_max_sessions_per_run_the_oldest_first(world, sqlite_url):
    load, _ = world
    spec = AgentSpec.model_validate({**SPEC.model_dump(), "memory": {"episodes": {"max_sessions_per_run": 1}}})
    agent = run(load(sqlite_url, ManualClock(T0 + timedelta(days=1)), spec=spec))
    recital = say(agent, T0, RECITAL)
    move = say(agent, T0 + timedelta(hours=8), MOVE)
    assert run(end_session(agent))["episode_ids"] == [episode_id(agent.record.id, recital[0].id)]
    assert run(end_session(agent))["episode_ids"] == [episode_id(agent.record.id, move[0].id)]


# -- rewriting in place ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("kind", ["edge", "server"])
def test_rewrite_replaces_text_and_vector_in_place_and_keeps_the_rest(tmp_path, kind):
    backend = (
        EdgeBackend(tmp_path / "shard", FakeEmbedder.dim)
        if kind == "edge"
        else ServerBackend.connect(":memory:", None, "pagemind_test", FakeEmbedder.dim)
    )
    clock = ManualClock(T0)
    service = ArchivalService(
        1,
        engine=make_engine(f"sqlite:///{tmp_path / 'state.db'}"),
        open_backend=lambda: backend,
        embedder=FakeEmbedder(),
        clock=clock,
    )
    try:
        kept = run(service.insert("Lin walked the Camino de Santiago in May", kind="episode", tags=["travel"]))
        assert run(service.search("Camino de Santiago"))  # one hit counted
        clock.advance(days=8)
        assert run(service.rewrite(kept.id, "Lin walked the Camino.", operation="faded", detail={"resolution": 8}))
        [row] = service.list()
        [point] = service.store.get([kept.id])
        for record in (row, point):
            assert (record.id, record.text, record.tags, record.hit_count) == (
                kept.id,
                "Lin walked the Camino.",
                ["travel"],
                1,
            )
            assert record.created_at == T0 and record.updated_at == clock.now
        vector = service.store.dense_vectors([kept.id])[kept.id]
        assert float(vector @ service.embedder.vector("Lin walked the Camino.")) == pytest.approx(1.0, abs=1e-3)
        [_, faded] = service.history(kept.id)
        assert (faded.operation, faded.text, faded.detail) == ("faded", "Lin walked the Camino.", {"resolution": 8})
        assert service.ledger.rows(unsettled=True) == []
        run(service.forget(kept.id))
        assert not run(service.rewrite(kept.id, "gone", operation="faded", detail={}))
        assert service.list(include_superseded=True) == [] and service.store.ids() == set()
    finally:
        backend.close()


def test_a_superseded_memory_is_not_rewritten(tmp_path):
    backend = EdgeBackend(tmp_path / "shard", FakeEmbedder.dim)
    v = np.zeros(FakeEmbedder.dim, dtype=np.float32)
    v[0] = 1.0
    service = ArchivalService(
        1,
        engine=make_engine(f"sqlite:///{tmp_path / 'state.db'}"),
        open_backend=lambda: backend,
        clock=ManualClock(T0),
        embedder=FakeEmbedder({"Lin lives in Lyon": v, "Lin lives in Paris": v}),
    )
    try:
        old = run(service.insert("Lin lives in Lyon"))
        assert run(service.insert("Lin lives in Paris")).action == "superseded"
        assert not run(service.rewrite(old.id, "Lin lived in Lyon", operation="faded", detail={}))
        assert [v.operation for v in service.history(old.id)] == ["insert", "superseded"]
        assert service.store.get([old.id])[0].text == "Lin lives in Lyon"
    finally:
        backend.close()


# -- fading ------------------------------------------------------------------------------------------------------


def test_episodes_fade_at_7_and_30_days_in_place_within_their_budgets(world, database_url):
    load, _ = world
    clock = ManualClock(T0 + timedelta(hours=1))
    agent = run(load(database_url, clock))
    say(agent, T0, RECITAL)
    run(end_session(agent))
    [episode] = episodes(agent)
    original_tokens = count_tokens(episode.text)
    assert original_tokens > 256

    clock.now = T0 + timedelta(days=6, hours=23)  # not yet a week old
    assert run(fade_episodes(agent))["faded"] == 0

    clock.now = T0 + timedelta(days=7, hours=1)
    assert run(end_session(agent))["faded"] == 1
    [week] = episodes(agent)
    assert week.id == episode.id and week.created_at == T0
    assert count_tokens(week.text) <= 256 and week.text.startswith("Recital worry")  # the answer, cut to the budget
    assert count_tokens(FADED_256) > 256
    [request] = [r for r in agent.model.requests if "getting old" in r.messages[0]["content"]]
    assert request.max_tokens == 256 and LONG_EPISODE.strip() in request.messages[1]["content"]

    calls = len(agent.model.requests)
    clock.advance(days=3)
    assert run(end_session(agent))["faded"] == 0 and len(agent.model.requests) == calls  # within its budget

    clock.now = T0 + timedelta(days=31)
    assert run(end_session(agent))["faded"] == 1
    [month] = episodes(agent)
    assert month.id == episode.id and month.text == FADED_64 and count_tokens(month.text) <= 64
    assert run(end_session(agent))["faded"] == 0

    history = agent.archival.history(episode.id)
    assert [v.operation for v in history] == ["insert", "faded", "faded"]
    assert history[1].detail == {"resolution": 256, "previous_tokens": original_tokens}
    assert history[2].detail == {"resolution": 64, "previous_tokens": count_tokens(week.text)}
    assert [v.text for v in history] == [LONG_EPISODE.strip(), week.text, FADED_64]
    # The point was written again: its vector and payload are the new text's.
    store = agent.archival.store
    [point] = store.get([episode.id])
    assert point.text == FADED_64 and point.created_at == T0
    vector = store.dense_vectors([episode.id])[episode.id]
    assert float(vector @ agent.archival.embedder.vector(FADED_64)) == pytest.approx(1.0, abs=1e-3)
    assert [h.id for h in run(agent.archival.search(FADED_64))] == [episode.id]


def test_an_episode_past_30_days_goes_straight_to_the_smallest_tier(world, sqlite_url):
    agent, clock = with_episode(world, sqlite_url, RECITAL)
    clock.now = T0 + timedelta(days=40)
    assert run(fade_episodes(agent))["faded"] == 1
    [episode] = episodes(agent)
    assert episode.text == FADED_64
    assert [(v.operation, v.detail.get("resolution")) for v in agent.archival.history(episode.id)] == [
        ("insert", None),
        ("faded", 64),
    ]


def test_a_short_episode_is_never_re_summarised(world, sqlite_url):
    agent, clock = with_episode(world, sqlite_url, MOVE)
    calls = len(agent.model.requests)
    clock.now = T0 + timedelta(days=60)
    assert run(fade_episodes(agent))["faded"] == 0 and len(agent.model.requests) == calls
    [episode] = episodes(agent)
    assert [v.operation for v in agent.archival.history(episode.id)] == ["insert"]


@pytest.mark.parametrize("answer", ["", "   ", None])
def test_an_empty_fade_answer_changes_nothing(world, sqlite_url, answer):
    agent, clock = with_episode(world, sqlite_url, RECITAL)

    def fade(request: ModelRequest):
        return {
            "choices": [{"index": 0, "message": {"role": "assistant", "content": answer}, "finish_reason": "stop"}],
            "id": "x",
            "object": "chat.completion",
            "created": 0,
            "model": "m",
            "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
        }

    agent.model_override = FunctionModel(by_purpose(no_steps, summarize=fade))
    clock.now = T0 + timedelta(days=8)
    assert run(fade_episodes(agent)) == {"faded": 0, "failed": 1}
    [episode] = episodes(agent)
    assert episode.text == LONG_EPISODE.strip() and len(agent.archival.history(episode.id)) == 1


def test_conversation_search_still_returns_the_full_text_of_a_faded_period(world, sqlite_url):
    agent, clock = with_episode(world, sqlite_url, RECITAL)
    clock.now = T0 + timedelta(days=31)
    run(end_session(agent))
    assert episodes(agent)[0].text == FADED_64
    arguments = {"query": "sarabande teacher", "start_date": "2026-11-02", "end_date": "2026-11-02"}
    [result] = run(
        dispatch_tool_calls(
            [ToolCall("1", "conversation_search", json.dumps(arguments))],
            BUILTIN_TOOLS,
            agent.tool_context(agent.memory.copy()),
        )
    )
    assert not result.is_error, result.content
    assert "The sarabande, my teacher Mrs Okafor says I rush the slow bars" in result.content


@pytest.mark.parametrize(
    "text",
    [
        "Lin was nervous before her cello recital on Saturday. " * 20,
        "她下周要搬到里昂，很紧张，也很期待新的公寓。" * 20,
    ],
)
def test_an_answer_over_budget_is_cut_by_tokens_never_through_a_character(text):
    for limit in (1, 7, 64):
        cut = within_tokens(text, limit, "o200k_base")
        assert 0 < count_tokens(cut) <= limit and text.startswith(cut) and "\ufffd" not in cut
    assert within_tokens("short", 64, "o200k_base") == "short"


def test_tiers_are_sorted_and_must_not_grow_with_age():
    config = EpisodesConfig(tiers=[{"after_days": 30, "max_tokens": 64}, {"after_days": 7, "max_tokens": 256}])
    assert [t.after_days for t in config.tiers] == [7, 30]
    with pytest.raises(ValueError, match="must not grow"):
        EpisodesConfig(tiers=[{"after_days": 7, "max_tokens": 64}, {"after_days": 30, "max_tokens": 256}])
    with pytest.raises(ValueError, match="must not grow"):
        EpisodesConfig(max_tokens=128)  # a fresh episode shorter than a faded one


# -- crashes -----------------------------------------------------------------------------------------------------

# The child makes the episode (day 0), then fades it (day 8). Edge upserts: 1 the episode's insert, 2 the rewrite.
KILL_POINTS = [
    "episodes.summarized@1",
    "archival.insert.pending@1",
    "archival.insert.upserted@1",
    "archival.insert.completed@1",
    "episodes.fade_answered@1",
    "archival.rewrite.pending@1",
    "edge.upsert.unflushed@2",
    "archival.rewrite.upserted@1",
    "archival.rewrite.completed@1",
]
FADE_AT = T0 + timedelta(days=8)


async def crash_scenario(agent: Agent, clock: ManualClock) -> None:
    """What the child runs: the session ends (an episode), then a week later the job fades it."""
    await end_session(agent)
    clock.now = FADE_AT
    await end_session(agent)


@pytest.fixture(scope="module")
def forkserver():
    from tests.support.archival_crash_child import HEAVY

    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(HEAVY)
    return context


def _die_at(forkserver, home: Path, url: str, point: str, mode: str = "scenario") -> None:
    from tests.support.episodes_crash_child import child

    process = forkserver.Process(target=child, args=(str(home), url, point, mode))
    process.start()
    process.join(timeout=120)
    assert process.exitcode == -signal.SIGKILL, f"{point}: exit code {process.exitcode} (the point was never reached?)"


def _check_after_rerun(home: Path, url: str, first_message_id: int) -> None:
    """The next process: opening the store reconciles; the job, run again, finishes; everything agrees."""
    backend = EdgeBackend(home / "shard", FakeEmbedder.dim)
    try:
        clock = ManualClock(FADE_AT)
        agent = run(load_agent(url, home, clock, backend, by_purpose(no_steps, summarize=summarizer)))
        run(end_session(agent))
        service = agent.archival
        [episode] = episodes(agent)
        assert episode.id == episode_id(agent.record.id, first_message_id)
        assert service.ledger.rows(unsettled=True) == []
        points = {p.id: p for p in service.store.all()}
        assert set(points) == {episode.id} and points[episode.id].text == episode.text
        vector = service.store.dense_vectors([episode.id])[episode.id]
        assert float(vector @ service.embedder.vector(episode.text)) == pytest.approx(1.0, abs=1e-3)
        assert [v.operation for v in service.history(episode.id)] == ["insert", "faded"]
        assert count_tokens(episode.text) <= 256 and episode.text.startswith("Recital worry")
        assert run(end_session(agent)) | {"episode_ids": []} == {
            "episodes": 0,
            "episode_ids": [],
            "chit_chat": 0,
            "sessions": 0,
            "faded": 0,
        }
    finally:
        backend.close()


def _seed(home: Path, url: str) -> int:
    """The conversation the child will turn into an episode; the id of its first message."""
    backend = EdgeBackend(home / "shard", FakeEmbedder.dim)
    try:
        agent = run(load_agent(url, home, ManualClock(T0), backend, no_steps))
        return say(agent, T0, RECITAL)[0].id
    finally:
        backend.close()


@pytest.mark.parametrize("point", KILL_POINTS)
def test_a_kill_at_any_step_then_a_rerun_leaves_one_consistent_faded_episode(forkserver, tmp_path, sqlite_url, point):
    first = _seed(tmp_path, sqlite_url)
    _die_at(forkserver, tmp_path, sqlite_url, point)
    _check_after_rerun(tmp_path, sqlite_url, first)


def test_a_kill_inside_the_reconcile_of_a_rewrite_cut_short(forkserver, tmp_path, sqlite_url):
    first = _seed(tmp_path, sqlite_url)
    _die_at(forkserver, tmp_path, sqlite_url, "archival.rewrite.pending@1")
    _die_at(forkserver, tmp_path, sqlite_url, "archival.reconcile.resynced@1", mode="open")
    _check_after_rerun(tmp_path, sqlite_url, first)


def test_every_kill_point_is_in_the_code():
    root = Path(__file__).parents[4] / "runtime"
    source = "".join(p.read_text() for p in root.rglob("*.py"))
    assert all(f'crash_point("{p.split("@")[0]}")' in source for p in KILL_POINTS)
