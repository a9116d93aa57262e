"""Recall ranking beyond the fused score (`memory.recall_rank`): speaker labels the query names, variety in the head."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import numpy as np

from pagemind.runtime.memory.recall.memory import RecallService
from pagemind.runtime.memory.recall.rank import Speakers, diversify
from pagemind.runtime.memory.retrieval.speakers import speaker
from pagemind.runtime.messages import Message
from pagemind.runtime.spec.agent import AgentSpec
from pagemind.runtime.spec.memory import ArchivalConfig
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.clock import ManualClock
from pagemind.runtime.testing.embedder import FakeEmbedder
from tests.runtime.memory.archival.test_archival import T0, at_cosine, unit


def test_speaker_labels():
    assert speaker("Caroline: I went to a support group") == "caroline"
    assert speaker("Dr. Lin: take two a day") == "dr. lin"
    assert speaker("张伟： 你好") == "张伟"
    assert speaker("10:30 is fine") == ""  # a time, not a speaker
    assert speaker("see http://example.org") == ""
    assert speaker("I told her: no way") == "i told her"  # three words before a colon still read as a label...
    assert speaker("so this is what I think about it: no") == ""  # ...but no longer phrases


def test_the_query_names_a_speaker():
    speakers = Speakers()
    speakers.add(["Caroline: hi", "Melanie: hello", "no label here", "Caroline: bye"])
    assert speakers.named("What did Caroline paint?").tolist() == [1, 0, 0, 1]
    assert speakers.named("What is caroline's hobby?").tolist() == [1, 0, 0, 1]  # any case, possessive
    assert speakers.named("What did Carol paint?").tolist() == [0, 0, 0, 0]  # whole words only
    assert speakers.named("What did Melanie and Caroline do?").tolist() == [1, 1, 0, 1]


def test_diversify_pushes_a_near_copy_below_a_different_result():
    a, b = unit(1), unit(0, 1)
    vectors = np.vstack([a, at_cosine(a, 0.99, 2), b, at_cosine(b, 0.5, 3)])
    scored = [(10, 1.0), (11, 0.95), (12, 0.8), (13, 0.5)]
    assert [i for i, _ in diversify(scored, vectors, 0.3)] == [10, 12, 11, 13]
    assert dict(diversify(scored, vectors, 0.3)) == dict(scored)  # scores are kept
    assert diversify(scored, vectors, 0.0) == scored


def _services(database_url: str, *configs: ArchivalConfig) -> list[RecallService]:
    store = StateStore(make_engine(database_url))
    record = store.ensure_agent(AgentSpec.model_validate({"name": "a", "model": {"name": "m"}, "system": "s"}))
    lines = [
        "Caroline: I painted a sunset over the lake last week",
        "Melanie: Caroline, a painted sunset sounds lovely! I painted one too once",
        "Caroline: The weather was nice all week",
        "Melanie: Here it rained every day",
        "Caroline: Rain again tomorrow, they say",
        "Melanie: Then bring an umbrella",
    ]
    store.append_messages(
        record.id,
        [
            Message("user" if n % 2 == 0 else "assistant", text, T0 + timedelta(minutes=n), in_context=False)
            for n, text in enumerate(lines)
        ],
    )
    # Every document gets a pseudo-random vector in the upper half; the query's sits in the lower half: no dense signal.
    embedder = FakeEmbedder({"What did Caroline paint?": unit(1)})
    return [
        RecallService(
            record.id, engine=store.engine, embedder=embedder, config=config, clock=ManualClock(T0 + timedelta(days=1))
        )
        for config in configs
    ]


def test_a_turn_by_the_speaker_the_query_names_ranks_first(database_url):
    # Melanie's reply names Caroline and repeats "painted" (and is keyed with Caroline's turn): by keywords alone it
    # wins; the question asks about Caroline, whose own turn says what she painted.
    plain, named = _services(
        database_url, ArchivalConfig(recall_speaker_boost=0, recall_next_weight=0), ArchivalConfig(recall_next_weight=0)
    )
    assert asyncio.run(plain.search("What did Caroline paint?"))[0].text.startswith("Melanie:")
    boosted = asyncio.run(named.search("What did Caroline paint?"))
    assert boosted[0].text.startswith("Caroline:")


def test_a_near_copy_of_a_better_result_gives_way_to_a_different_one(database_url):
    store = StateStore(make_engine(database_url))
    record = store.ensure_agent(AgentSpec.model_validate({"name": "a", "model": {"name": "m"}, "system": "s"}))
    copy = "Caroline: my guitar lessons start on Monday"
    lines = [
        copy,
        "Melanie: good luck!",
        copy,
        "Melanie: twice?",
        "Caroline: I sold my old guitar today",
        "Melanie: nice",
        "Caroline: the weather is fine",
        "Melanie: here it rains",
    ]
    messages = [
        Message("user" if n % 2 == 0 else "assistant", text, T0 + timedelta(hours=8 * n), in_context=False)
        for n, text in enumerate(lines)
    ]  # 8 hours apart: each its own session, keyed alone
    store.append_messages(record.id, messages)
    query = unit(1)
    vectors = {"guitar": query}
    for n in (0, 2):
        vectors[f"[{messages[n].created_at:%-d %B %Y}] user: {copy}"] = at_cosine(query, 0.9, 2)
    vectors[f"[{messages[4].created_at:%-d %B %Y}] user: {lines[4]}"] = at_cosine(query, 0.6, 3)
    embedder = FakeEmbedder(vectors)

    def top(diversity: float) -> list[str]:
        service = RecallService(
            record.id,
            engine=store.engine,
            embedder=embedder,
            clock=ManualClock(T0),
            config=ArchivalConfig(recall_diversity=diversity, recall_next_weight=0),
        )
        return [h.text for h in asyncio.run(service.search("guitar", limit=3))]

    assert top(0.0) == [copy, copy, lines[4]]
    assert top(0.4) == [copy, lines[4], copy]
