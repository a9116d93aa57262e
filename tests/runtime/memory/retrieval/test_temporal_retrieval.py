"""Questions about time and about several facts: the query's time words (`memory.query_time`), the time boost and
the bounded second round (`memory.rounds`) in recall and archival search; knobs off → today's ranking."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta

import pytest

from pagemind.runtime.memory.archival.memory import ArchivalService
from pagemind.runtime.memory.recall.memory import RecallService
from pagemind.runtime.memory.retrieval.query_time import mentions_time, parse_query_time
from pagemind.runtime.memory.retrieval.rounds import entities, new_entities, refine
from pagemind.runtime.memory.vectors.edge import EdgeBackend
from pagemind.runtime.messages import Message
from pagemind.runtime.spec.agent import AgentSpec, later_defaults
from pagemind.runtime.spec.memory import ArchivalConfig, MemoryConfig
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.clock import ManualClock
from pagemind.runtime.testing.embedder import FakeEmbedder

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)  # a Monday
BOOSTED = ArchivalConfig(temporal={"range_boost": 0.5, "when_boost": 0.5})
OFF = ArchivalConfig(temporal={"range_boost": 0, "when_boost": 0}, multihop={"enabled": False})  # as before


def ranges(query: str, now: datetime = NOW) -> list[tuple[date, date]]:
    return [(r.start, r.end) for r in parse_query_time(query, ManualClock(now)()).ranges]


# -- the query parser -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "query, expected",
    [
        ("what did I do yesterday?", [(date(2026, 11, 29), date(2026, 11, 30))]),
        ("where did we go last week", [(date(2026, 11, 23), date(2026, 11, 30))]),
        ("what happened two weeks ago", [(date(2026, 11, 16), date(2026, 11, 23))]),
        ("the concert last month", [(date(2026, 10, 1), date(2026, 11, 1))]),
        ("what did Lin cook last May", [(date(2026, 5, 1), date(2026, 6, 1))]),
        ("what did Lin cook in December", [(date(2025, 12, 1), date(2026, 1, 1))]),  # the latest December
        ("what did Lin cook in November", [(date(2026, 11, 1), date(2026, 12, 1))]),  # this one, still going
        ("the trip in 2023", [(date(2023, 1, 1), date(2024, 1, 1))]),
        ("Where was Tim in the week before 16 November 2023?", [(date(2023, 11, 9), date(2023, 11, 16))]),
        ("what did she say on May 8, 2023", [(date(2023, 5, 8), date(2023, 5, 9))]),
        ("the tournament in November 2022", [(date(2022, 11, 1), date(2022, 12, 1))]),
        ("last year's holiday", [(date(2025, 1, 1), date(2026, 1, 1))]),
        ("上个月我去了哪里", [(date(2026, 10, 1), date(2026, 11, 1))]),
        ("去年的生日", [(date(2025, 1, 1), date(2026, 1, 1))]),
        ("三天前吃了什么", [(date(2026, 11, 27), date(2026, 11, 28))]),
        ("上周三说了什么", [(date(2026, 11, 25), date(2026, 11, 26))]),
        ("昨天的电影", [(date(2026, 11, 29), date(2026, 11, 30))]),
        ("2023年5月的旅行", [(date(2023, 5, 1), date(2023, 6, 1))]),
        ("5月8号那天", [(date(2026, 5, 8), date(2026, 5, 9))]),
        ("What is Lin's favourite colour?", []),
        ("What did Lin do before the trip?", []),  # an event, not a date: nothing to read
        ("on 31 February 2023", [(date(2023, 2, 1), date(2023, 3, 1))]),  # no such day: its month, no error
    ],
)
def test_query_periods_against_the_agents_clock(query, expected):
    assert ranges(query) == expected


def test_relative_words_move_with_the_clock():
    assert ranges("last month", datetime(2023, 1, 15, tzinfo=UTC)) == [(date(2022, 12, 1), date(2023, 1, 1))]
    assert ranges("去年", datetime(2023, 1, 15, tzinfo=UTC)) == [(date(2022, 1, 1), date(2023, 1, 1))]


@pytest.mark.parametrize(
    "query, asks",
    [
        ("When did Melanie go camping?", True),
        ("what year did he move", True),
        ("我什么时候去的北京", True),
        ("他哪天生日", True),
        ("Where did Melanie go camping?", False),
        ("我去了北京", False),
    ],
)
def test_when_questions(query, asks):
    assert parse_query_time(query, NOW).asks_when is asks


def test_a_text_that_says_when():
    assert mentions_time("I went to a support group yesterday")
    assert mentions_time("We met in May 2023") and mentions_time("我上周去了公园") and mentions_time("3 days ago")
    assert not mentions_time("I love painting landscapes") and not mentions_time("我喜欢喝绿茶")


# -- the time boost in recall and archival search ---------------------------------------------------------------


def recall_store(tmp_path, lines: list[tuple[str, str, datetime]]) -> tuple[StateStore, int, dict[str, int]]:
    store = StateStore(make_engine(f"sqlite:///{tmp_path / 'recall.db'}"))
    record = store.ensure_agent(AgentSpec.model_validate({"name": "a", "model": {"name": "m"}, "system": "s"}))
    stored = store.append_messages(record.id, [Message(role, text, at, in_context=False) for role, text, at in lines])
    return store, record.id, {m.content: m.id for m in stored}


def recall_order(store: StateStore, agent_id: int, query: str, config: ArchivalConfig) -> list[int]:
    service = RecallService(agent_id, engine=store.engine, embedder=None, config=config, clock=ManualClock(NOW))
    return [h.id for h in asyncio.run(service.search(query, limit=5))]


def test_recall_ranks_messages_from_the_named_period_first(tmp_path):
    # (the index keys each message with its date, "[10 October 2026]": the query's words must not match it)
    october, november = "I went hiking with Mei and her little dog Bo", "I went hiking with Mei"
    store, agent, ids = recall_store(
        tmp_path,
        [("user", october, datetime(2026, 10, 10, tzinfo=UTC)), ("user", november, datetime(2026, 11, 10, tzinfo=UTC))],
    )
    query = "who did I go hiking with last month?"
    assert recall_order(store, agent, query, OFF) == [ids[november], ids[october]]  # off: as today
    assert recall_order(store, agent, query, BOOSTED) == [ids[october], ids[november]]
    assert recall_order(store, agent, "上个月我和谁去徒步 hiking", BOOSTED) == [ids[october], ids[november]]
    # a question naming no time is ranked as before
    assert recall_order(store, agent, "who did I go hiking with?", BOOSTED) == [ids[november], ids[october]]


def test_recall_when_question_favours_the_message_that_says_when(tmp_path):
    dated, plain = "I went to the pottery class with Mei last Friday, it was fun", "The pottery class with Mei"
    at = datetime(2026, 8, 10, tzinfo=UTC)
    store, agent, ids = recall_store(tmp_path, [("user", dated, at), ("user", plain, at + timedelta(days=1))])
    query = "When did I go to the pottery class?"
    assert recall_order(store, agent, query, OFF)[0] == ids[plain]
    assert recall_order(store, agent, query, BOOSTED)[0] == ids[dated]


@pytest.fixture
def archival(tmp_path):
    backend = EdgeBackend(tmp_path / "qdrant", FakeEmbedder.dim)
    engine = make_engine(f"sqlite:///{tmp_path / 'state.db'}")
    clock = ManualClock(datetime(2026, 10, 10, tzinfo=UTC))  # within 90 days of NOW: not dormant

    def make(config: ArchivalConfig) -> ArchivalService:
        return ArchivalService(
            1, engine=engine, open_backend=lambda: backend, embedder=FakeEmbedder(), config=config, clock=clock
        )

    yield make, clock
    backend.close()


def test_archival_ranks_memories_from_the_named_period_first(archival):
    make, clock = archival
    service = make(ArchivalConfig())
    # (the keyword index holds each memory's date in words: the query's words must not match it)
    october = asyncio.run(service.insert("Lin went sailing with Tom", kind="episode")).id
    clock.now = datetime(2026, 11, 10, tzinfo=UTC)
    november = asyncio.run(service.insert("Lin went sailing with Ann", kind="episode")).id
    clock.now = NOW

    def order(config: ArchivalConfig, query: str = "who did Lin go sailing with last month?") -> list[str]:
        service.config = config
        return [h.id for h in asyncio.run(service.search(query, mode="bm25", count_hits=False))]

    assert order(OFF) == [november, october]  # off: the newer first, as today
    assert order(ArchivalConfig(temporal={"range_boost": 1.0})) == [october, november]
    assert order(ArchivalConfig(temporal={"range_boost": 1.0}), "who did Lin go sailing with?") == [november, october]


# -- the second round ---------------------------------------------------------------------------------------------


@dataclass
class Item:
    id: int
    text: str
    created_at: datetime = NOW


def test_entities_are_names_and_titles_not_sentence_openers_or_speakers():
    assert entities("Caroline: I read 'Becoming Nicole' with Amy Ellis. Then we went to New York.") == [
        "Becoming Nicole",
        "Amy Ellis",
        "New York",
    ]
    assert entities("我最近在看《三体》，推荐给你") == ["三体"]
    assert entities("That sounds great! Thanks so much.") == []
    assert new_entities("What did Amy read?", ["Amy read Dune with Paul", "Paul liked Dune"], 3) == ["Dune", "Paul"]


def test_second_round_runs_once_when_new_entities_appear_and_keeps_the_first_rounds_hits():
    calls: list[str] = []
    first = [(2.0, Item(1, "I finally read 'Becoming Nicole' last week")), (0.8, Item(2, "books are great"))]

    def again(query: str) -> list[tuple[float, Item]]:
        calls.append(query)  # its results name yet more entities: still no third round
        return [(3.0, Item(3, "Becoming Nicole is by Amy Ellis Nutt, see Boston")), (1.5, Item(1, first[0][1].text))]

    on = ArchivalConfig(multihop={"enabled": True})
    ranked = refine("Which book did I read?", first, again, NOW, on)
    assert calls == ["Which book did I read? Becoming Nicole"]
    assert [item.id for _, item in ranked] == [1, 3, 2]  # 1 + 0.5·0.5, 0.5·1, 0.4


def test_no_second_round_without_new_entities_or_with_the_knob_off():
    calls: list[str] = []

    def again(query: str) -> list[tuple[float, Item]]:
        calls.append(query)
        return []

    first = [(2.0, Item(1, "Lin loves Dune")), (1.0, Item(2, "it is a long book"))]
    on = ArchivalConfig(multihop={"enabled": True})
    assert refine("Does Lin love Dune?", first, again, NOW, on) == first
    assert refine("What does Lin love?", first, again, NOW, OFF) == first
    assert calls == []


def test_recall_second_round_finds_the_turn_that_names_the_entity(tmp_path):
    t = datetime(2026, 8, 10, tzinfo=UTC)
    store, agent, ids = recall_store(
        tmp_path,
        [
            ("user", "I finally read the book 'Becoming Nicole'", t),
            ("user", "The weather is nice", t + timedelta(days=1)),
            ("user", "Becoming Nicole is by Amy Ellis Nutt, such a moving story", t + timedelta(days=2)),
        ],
    )
    query = "Which book did I read?"
    assert recall_order(store, agent, query, OFF) == [ids["I finally read the book 'Becoming Nicole'"]]
    hop = recall_order(store, agent, query, ArchivalConfig(multihop={"enabled": True}))
    assert hop == [
        ids["I finally read the book 'Becoming Nicole'"],
        ids["Becoming Nicole is by Amy Ellis Nutt, such a moving story"],
    ]


def test_defaults_boost_time_and_leave_the_second_round_off():
    config = ArchivalConfig()
    assert config.temporal.range_boost > 0 and config.temporal.when_boost > 0 and not config.multihop.enabled


def test_new_knobs_leave_the_spec_fingerprint_alone():
    assert {"temporal", "multihop"} <= set(later_defaults(MemoryConfig())["archival"])


@pytest.mark.parametrize(
    "phrase",
    [
        "3 days ago",
        "a day ago",
        "two weeks ago",
        "a couple of months ago",
        "13 months ago",
        "several years ago",
        "last Monday",
        "this past sunday",
        "last Thursday",
    ],
)
def test_the_query_reads_a_relative_phrase_as_the_memory_dated_it(phrase):
    """`dating` writes a memory's relative phrase as a date; `query_time` reads the same phrase in a question as a
    period (one resolver for both): the date written falls in the period read, on every weekday."""
    from pagemind.runtime.memory.retrieval.dating import absolute_dates

    for offset in range(14):
        now = NOW + timedelta(days=offset)
        [period] = parse_query_time(phrase, now).ranges
        written = absolute_dates(phrase, now).removeprefix(phrase).strip(" ()")
        if written.startswith("week of "):
            assert period.start == date.fromisoformat(
                written.removeprefix("week of ")
            ) and period.end - period.start == timedelta(days=7)
        elif written[:4].isdigit() and len(written) == 4:
            assert (period.start, period.end) == (date(int(written), 1, 1), date(int(written) + 1, 1, 1))
        elif written[0].isdigit():
            assert (period.start, period.end) == (
                date.fromisoformat(written),
                date.fromisoformat(written) + timedelta(days=1),
            )
        else:
            assert period.start.strftime("%B %Y") == written and period.end.day == 1
