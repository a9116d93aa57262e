"""bench.bilingual_data is what it says: every query has its memory, the paraphrase group shares no Chinese
character with its memory, the keyword group shares a word, the cross group crosses languages."""

from __future__ import annotations

import re

from bench.bilingual_data import DISTRACTORS, EN, GROUPS, QUERIES, ZH
from pagemind.runtime.memory.retrieval.keywords import query_terms, terms

HAN = re.compile(r"[\u4e00-\u9fff]")


def chinese(text: str) -> bool:
    return bool(HAN.search(text))


def test_the_set_is_as_described():
    memories = dict(ZH + EN + DISTRACTORS)
    assert len(memories) == len(ZH) + len(EN) + len(DISTRACTORS) and len(QUERIES) >= 100
    assert {group for group, _, _ in QUERIES} == set(GROUPS) and len(set(q for _, q, _ in QUERIES)) == len(QUERIES)
    for group, query, key in QUERIES:
        memory = memories[key]
        assert not key.startswith(("zx-", "ex-")), query  # distractors answer nothing
        if group == "zh-para":
            assert chinese(memory) and not set(HAN.findall(query)) & set(HAN.findall(memory)), query
        elif group == "zh-kw":
            assert chinese(memory) and set(query_terms(query)) & set(terms(memory)), query
        elif group == "en":
            assert not chinese(query) and not chinese(memory), query
        else:
            assert chinese(query) != chinese(memory), query
