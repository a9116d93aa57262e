"""Expiry from wording and decay from disuse: time-bound memories and memories nobody retrieves leave default
results (in the vector-store filter, so they take no place in the top k) but stay findable by date and listed by
`pagemind memory archival AGENT --all`. Disuse counts the agent's active days (dates of its user messages), so
the tests write the conversation that makes days active. Both adapters, under a ManualClock."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from pagemind.runtime.agent import Agent
from pagemind.runtime.cli.main import main
from pagemind.runtime.memory.archival.memory import ArchivalService
from pagemind.runtime.memory.archival.write_policy import normalise_text
from pagemind.runtime.memory.lifecycle.decay import staleness
from pagemind.runtime.memory.lifecycle.expiry import expiry_from_wording
from pagemind.runtime.messages import Message
from pagemind.runtime.spec.agent import AgentSpec
from pagemind.runtime.spec.memory import ArchivalConfig, ExpiryConfig
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.clock import ManualClock
from pagemind.runtime.testing.embedder import FakeEmbedder
from tests.runtime.memory.archival.test_archival import backend  # noqa: F401 (the fixture: both adapters)

DIM = FakeEmbedder.dim
WED = datetime(2026, 12, 2, 9, 30, tzinfo=UTC)  # a Wednesday


def end_of(day: str) -> datetime:
    """The midnight after `day` (how every expiry ends a period)."""
    return datetime.fromisoformat(day).replace(tzinfo=UTC) + timedelta(days=1)


@pytest.mark.parametrize(
    "text, ends",
    [
        ("Lin is busy today", "2026-12-02"),
        ("Lin is going to a concert tonight", "2026-12-02"),
        ("Lin has a dentist appointment tomorrow", "2026-12-03"),
        ("The user said they have an exam next week", "2026-12-13"),  # reported speech: the plan's tense counts
        ("The user mentioned a dentist appointment tomorrow", "2026-12-03"),
        ("Lin has an exam the day after tomorrow", "2026-12-04"),
        ("Lin is in Tokyo this week", "2026-12-06"),  # weeks end with their Sunday
        ("Lin is camping this weekend", "2026-12-06"),
        ("Lin is travelling next week", "2026-12-13"),
        ("Lin is staying with her parents until Friday", "2026-12-04"),
        ("Lin stays at the office till Wednesday", "2026-12-02"),  # the named day may be today
        ("Lin must finish the report by Monday", "2026-12-07"),
        ("Lin will be away until the end of next week", "2026-12-13"),
        ("Lin has to submit the form by 2026-12-24", "2026-12-24"),
        ("Lin is off sugar this month", "2026-12-31"),
        ("Lin is on antibiotics for the next 3 days", "2026-12-05"),
        ("Lin wants a reply within a week", "2026-12-09"),
        ("Lin works from home for the rest of the week", "2026-12-06"),
        ("Lin has a job interview on Friday", "2026-12-04"),
        ("Lin is scheduled for surgery tomorrow", "2026-12-03"),
        ("Lin is busy today but free next week", "2026-12-13"),  # the latest end wins
        ("今天很忙", "2026-12-02"),
        ("今晚去看电影", "2026-12-02"),
        ("明天有个面试", "2026-12-03"),
        ("后天要考试", "2026-12-04"),
        ("这周在出差", "2026-12-06"),
        ("本周要交报告", "2026-12-06"),
        ("这个周末去爬山", "2026-12-06"),
        ("下周去上海出差", "2026-12-13"),
        ("下周五有个会", "2026-12-11"),
        ("下个月要去日本", "2027-01-31"),
        ("这个月不吃甜食", "2026-12-31"),
        ("到周五都在北京", "2026-12-04"),
        ("周五之前要交报告", "2026-12-04"),
        ("三天内回复", "2026-12-05"),
        ("接下来两周在外地", "2026-12-16"),
        ("我下周要考试了", "2026-12-13"),  # 了 with a future marker is not past
    ],
)
def test_time_bound_wording_expires_at_the_end_of_its_period(text, ends):
    found = expiry_from_wording(text, WED)
    assert found is not None and found.at == end_of(ends), found


@pytest.mark.parametrize(
    "text",
    [
        "I've lived here since last week",
        "Lin told me she went to Paris last week",
        "The user mentioned that she started a new job today",
        "Lin started a new job today",
        "Lin moved to Berlin this month",
        "Lin moves to Berlin next month",  # the start of something lasting
        "Lin starts a new job next week",
        "Lin is getting married next month",
        "Lin will be vegetarian from next week on",
        "Lin goes swimming every Tuesday",  # recurring
        "Lin works out three times a week",
        "Lin likes to sleep in on weekends",
        "Lin stayed with her parents until Friday",  # past, whatever bound it names
        "Lin was sick today",
        "Lin has booked a table for tonight",
        "Lin finished the book in 3 days",
        "Lin has been learning Chinese for 3 years",
        "Lin is allergic to peanuts",
        "Lin's favourite day is Friday",
        "今天去了公园",
        "我从下周开始吃素",
        "每周五去游泳",
        "下个月搬家",
        "上周去了上海",
        "她已经毕业了",
        "周末一般在家",
        "她对花生过敏",
    ],
)
def test_wording_that_is_not_time_bound_sets_no_expiry(text):
    assert expiry_from_wording(text, WED) is None


def test_a_dated_phrase_keeps_its_expiry_when_written_again_later():
    text = normalise_text("Lin is in Paris next week", WED)  # "next week (week of 2026-12-07)"
    first = expiry_from_wording(text, WED)
    assert first is not None and first.at == end_of("2026-12-13")
    assert expiry_from_wording(text, WED + timedelta(days=3)).at == first.at  # not next week from a later write
    # a period already over when written again ends with the day it is written, never before
    assert expiry_from_wording(text, WED + timedelta(days=30)).at == end_of("2027-01-01")


def test_staleness_falls_from_30_active_days_to_its_floor_at_90():
    assert staleness(30, 30, 90, 0.3) == 1.0
    assert staleness(60, 30, 90, 0.3) == pytest.approx(0.85)
    assert staleness(200, 30, 90, 0.3) == pytest.approx(0.7)
    with pytest.raises(ValueError, match="decay_after_days"):
        ExpiryConfig(decay_after_days=90, hide_after_days=30)


# -- the service, on both adapters ------------------------------------------------------------------------------


def axis(i: int) -> np.ndarray:
    v = np.zeros(DIM, dtype=np.float32)
    v[i] = 1.0
    return v


def toward(query: np.ndarray, cos: float, i: int) -> np.ndarray:
    """A unit vector at cosine `cos` to the unit vector `query`, tilted towards axis `i`."""
    return (cos * query + np.sqrt(1 - cos * cos) * axis(i)).astype(np.float32)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock(WED)


@pytest.fixture
def service(backend, tmp_path, clock):
    """An ArchivalService whose texts and queries sit where the test puts them; ranking weighs only disuse."""
    query = axis(0)
    vectors = {
        "plans": query,
        "Lin is in Tokyo until Friday": toward(query, 0.7, 1),
        "Lin's sister Mei lives in Oslo": toward(query, 0.7, 2),
        "Lin plays the cello": toward(query, 0.7, 3),
        "cello": axis(3),
        "Lin's brother Bo lives in Rome": toward(query, 0.95, 4),
    }
    config = ArchivalConfig(recency_weight=0, hit_boost=0, importance_weight=0)
    return ArchivalService(
        1,
        engine=make_engine(f"sqlite:///{tmp_path / 'state.db'}"),
        open_backend=lambda: backend,
        embedder=FakeEmbedder(vectors),
        config=config,
        clock=clock,
    )


def talk(service: ArchivalService, first: int, last: int, every: int = 1) -> None:
    """The user writes to agent 1 on days `first`..`last` after WED (every `every` days): those days are active."""
    store = StateStore(service.engine)
    spec = AgentSpec.model_validate({"name": "keeper", "model": {"name": "none"}, "system": "notes"})
    assert store.ensure_agent(spec).id == 1
    store.append_messages(
        1, [Message("user", "hello", WED + timedelta(days=d, hours=2)) for d in range(first, last + 1, every)]
    )


def run(coro):
    return asyncio.run(coro)


def texts(hits) -> set[str]:
    return {h.text.split(" (")[0] for h in hits}


def test_insert_reads_the_expiry_from_the_wording_unless_given_or_history(service):
    run(service.insert("Lin is in Tokyo until Friday"))
    run(service.insert("Lin has a dentist appointment tomorrow", kind="todo", expires_at=WED + timedelta(hours=2)))
    run(service.insert("Lin and Mei talked about a trip this week", kind="episode"))
    by_text = {m.text: m for m in service.list()}
    assert by_text["Lin is in Tokyo until Friday"].expires_at == end_of("2026-12-04")
    assert by_text["Lin has a dentist appointment tomorrow (2026-12-03)"].expires_at == WED + timedelta(hours=2)
    assert by_text["Lin and Mei talked about a trip this week (week of 2026-11-30)"].expires_at is None
    assert service.store.get([by_text["Lin is in Tokyo until Friday"].id])[0].expires_at == end_of("2026-12-04")


def test_wording_expiry_can_be_switched_off(backend, tmp_path):
    svc = ArchivalService(
        1,
        engine=make_engine(f"sqlite:///{tmp_path / 's.db'}"),
        open_backend=lambda: backend,
        embedder=FakeEmbedder(),
        config=ArchivalConfig(expiry=ExpiryConfig(from_wording=False)),
        clock=ManualClock(WED),
    )
    run(svc.insert("Lin is in Tokyo until Friday"))
    assert svc.list()[0].expires_at is None


def test_expired_memories_leave_default_search_but_a_date_range_finds_them(service, clock):
    run(service.insert("Lin is in Tokyo until Friday"))
    run(service.insert("Lin's sister Mei lives in Oslo"))
    assert texts(run(service.search("plans", count_hits=False))) == {
        "Lin is in Tokyo until Friday",
        "Lin's sister Mei lives in Oslo",
    }
    clock.now = end_of("2026-12-04")  # Friday is over
    assert texts(run(service.search("plans", count_hits=False))) == {"Lin's sister Mei lives in Oslo"}
    assert service.stats()[0] == 1
    dated = run(service.search("plans", start_date=WED - timedelta(days=1), end_date=WED + timedelta(days=1)))
    assert texts(dated) == {"Lin is in Tokyo until Friday", "Lin's sister Mei lives in Oslo"}


def test_a_date_range_finds_expired_memories_when_nothing_is_live(service, clock):
    run(service.insert("Lin is in Tokyo until Friday"))
    clock.now = WED + timedelta(days=10)
    assert service.stats()[0] == 0 and run(service.search("plans")) == []
    assert texts(run(service.search("plans", start_date=WED - timedelta(days=1)))) == {"Lin is in Tokyo until Friday"}


def test_in_daily_use_memories_decay_after_30_days_unretrieved_and_leave_default_results_after_90(service, clock):
    talk(service, 0, 200)  # the user writes every day
    run(service.insert("Lin plays the cello"))
    run(service.insert("Lin's sister Mei lives in Oslo"))
    clock.now = WED + timedelta(days=20)
    [hit] = run(service.search("cello", top_k=1))  # retrieved: the cello memory is used on day 20
    assert hit.text == "Lin plays the cello"

    clock.now = WED + timedelta(days=29)
    scores = {h.text: h.score for h in run(service.search("plans", count_hits=False))}
    assert scores["Lin plays the cello"] == scores["Lin's sister Mei lives in Oslo"]  # same cosine, no decay yet

    clock.now = WED + timedelta(days=50)  # Oslo unused for 50 days: 20 days into the decay; cello for 30
    scores = {h.text: h.score for h in run(service.search("plans", count_hits=False))}
    assert scores["Lin's sister Mei lives in Oslo"] / scores["Lin plays the cello"] == pytest.approx(0.9, abs=1e-3)

    clock.now = WED + timedelta(days=91)
    assert texts(run(service.search("plans", count_hits=False))) == {"Lin plays the cello"}
    assert service.stats()[0] == 2  # dormant is not gone
    assert texts(run(service.search("plans", start_date=WED, count_hits=False))) == {
        "Lin plays the cello",
        "Lin's sister Mei lives in Oslo",
    }


def test_dormant_memories_do_not_take_places_in_the_top_k(service, clock):
    talk(service, 0, 200)
    run(service.insert("Lin's brother Bo lives in Rome"))  # nearer the query than the cello
    clock.now = WED + timedelta(days=60)
    run(service.insert("Lin plays the cello"))
    clock.now = WED + timedelta(days=100)  # Rome dormant, cello not
    assert texts(run(service.search("plans", top_k=1, count_hits=False))) == {"Lin plays the cello"}
    dated = run(service.search("plans", top_k=1, start_date=WED, count_hits=False))
    assert texts(dated) == {"Lin's brother Bo lives in Rome"}


def test_a_memory_shown_by_prefetch_counts_as_retrieved_without_a_hit(service, clock):
    talk(service, 0, 200)
    run(service.insert("Lin's sister Mei lives in Oslo"))
    clock.now = WED + timedelta(days=80)
    run(service.search("plans", count_hits=False))  # inspection: not a use
    run(service.search("plans", count_hits=False, seen=True))  # prefetch: shown to the model
    [memory] = service.list()
    assert (memory.hit_count, memory.last_hit_at) == (0, clock.now)
    assert service.store.get([memory.id])[0].last_hit_at == clock.now  # the point agrees: the filter sees it
    clock.now = WED + timedelta(days=150)  # 70 days after it was shown, 150 after it was written
    assert texts(run(service.search("plans", count_hits=False))) == {"Lin's sister Mei lives in Oslo"}
    clock.now = WED + timedelta(days=171)
    assert run(service.search("plans", count_hits=False)) == []


def test_an_agent_nobody_talks_to_forgets_nothing(service, clock):
    talk(service, 0, 0)
    run(service.insert("Lin's sister Mei lives in Oslo"))
    run(service.insert("Lin plays the cello"))
    fresh = {h.text: h.score for h in run(service.search("plans", count_hits=False))}
    clock.now = WED + timedelta(days=120)  # the user comes back after four months
    later = {h.text: h.score for h in run(service.search("plans", count_hits=False))}
    assert later == fresh and len(later) == 2  # no decay at all: no day since was active


def test_an_agent_used_weekly_forgets_on_its_own_timescale(service, clock):
    talk(service, 0, 1000, every=7)
    run(service.insert("Lin's sister Mei lives in Oslo"))
    [fresh] = run(service.search("plans", count_hits=False))
    clock.now = WED + timedelta(days=7 * 60, hours=3)  # 60 active days later (420 calendar days)
    [hit] = run(service.search("plans", count_hits=False))
    assert hit.score == pytest.approx(fresh.score * 0.85, abs=1e-3)  # half way down the 60 decaying active days
    clock.now = WED + timedelta(days=7 * 90, hours=3)  # 90 active days unused: still shown, at the floor
    [hit] = run(service.search("plans", count_hits=False))
    assert hit.score == pytest.approx(fresh.score * 0.7, abs=1e-3)
    clock.now = WED + timedelta(days=7 * 91, hours=3)  # 91: dormant, found by date only
    assert run(service.search("plans", count_hits=False)) == []
    assert texts(run(service.search("plans", start_date=WED, count_hits=False))) == {"Lin's sister Mei lives in Oslo"}
    assert service.stats()[0] == 1


def test_active_days_are_read_once_a_day_not_on_every_search(service, clock):
    run(service.insert("Lin's sister Mei lives in Oslo"))
    talk(service, 0, 0)
    clock.now = WED + timedelta(hours=3)
    for _ in range(5):
        run(service.search("plans", count_hits=False))
    assert service.activity.reads == 1  # today is active: nothing later can change the days up to today
    clock.now = WED + timedelta(days=1, hours=3)
    run(service.search("plans", count_hits=False))
    run(service.search("plans", count_hits=False))
    assert service.activity.reads == 3  # tomorrow is not active yet: each search looks for new messages
    talk(service, 1, 1)
    run(service.search("plans", count_hits=False))
    run(service.search("plans", count_hits=False))
    assert service.activity.reads == 4 and service.activity.at(clock.now).days[-1] == clock.now.date()


# -- the agent and the CLI (embedded store) -----------------------------------------------------------------------

AGENT_YAML = """
name: keeper
model: {name: gpt-4o-mini}
system: You keep notes.
tools: [send_message, archival_memory_insert, archival_search]
"""


def test_prefetch_marks_memories_used_and_the_listing_marks_what_default_results_leave_out(tmp_path, capsys):
    path = tmp_path / "keeper.yaml"
    path.write_text(AGENT_YAML)
    now = datetime.now(UTC)
    clock = ManualClock(now - timedelta(days=100))

    async def seed() -> None:
        agent = await Agent.load(path, clock=clock)
        agent.store.append_messages(
            agent.record.id, [Message("user", "hi", now - timedelta(days=d)) for d in range(100)]
        )  # in daily use: every day is active
        await agent.archival.insert("Lin is in Tokyo until Friday")
        await agent.archival.insert("Lin's sister Mei lives in Oslo")
        await agent.archival.insert("Lin is allergic to peanuts", kind="constraint")
        clock.now = now - timedelta(days=20)
        await agent.prefetch("any peanut allergy?")  # shown to the model: used 20 days ago, not a hit
        clock.now = now
        await agent.archival.insert("Lin's favourite colour is green")

    run(seed())
    assert main(["memory", "archival", str(path)]) == 0
    listing = capsys.readouterr().out
    assert listing.startswith("3 live archival memories") and "(2 expired or dormant, listed with --all)" in listing
    assert "peanuts" in listing and "green" in listing and "Oslo" not in listing and "Tokyo" not in listing

    assert main(["memory", "archival", str(path), "--all"]) == 0
    lines = capsys.readouterr().out.splitlines()
    flag = {text.strip().split(" (")[0]: head for head, text in zip(lines[1::2], lines[2::2])}
    assert "[expired" in flag["Lin is in Tokyo until Friday"]
    assert "[dormant: unused since" in flag["Lin's sister Mei lives in Oslo"]
    assert "[" not in flag["Lin is allergic to peanuts"] and "hits 0" in flag["Lin is allergic to peanuts"]


@pytest.mark.parametrize(
    "text",
    [
        "Lin must reply by 2026-13-45",
        "Lin is away for the next 99999999 days",
        "Lin is away for the next 3 weeks (week of 2026-99-01)",
    ],
)
def test_odd_wording_never_fails_an_insert(text):
    found = expiry_from_wording(text, WED)
    assert found is None or found.at > WED
