"""The archival write path's policy: normalise a new memory, and decide what it does to its nearest neighbour.

Pure functions (no store): `normalise_text` dates relative time words, `conflicts` tells a changed fact from a
restatement, `decide` picks insert, refresh a duplicate, or supersede; `keyword_document` is what the BM25 side
indexes for a memory.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from pagemind.runtime.memory.retrieval.dating import absolute_dates
from pagemind.runtime.memory.retrieval.keywords import analysed, terms
from pagemind.runtime.memory.vectors.records import Hit, MemoryRecord
from pagemind.runtime.spec.memory import ArchivalConfig
from pagemind.runtime.state.records import without_nul

_NEGATION = re.compile(r"\b(?:not|no|never|none|nobody|nothing|neither|nor|without|anymore|stopped|quit)\b|n't\b", re.I)
_NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")
_SPACE = re.compile(r"\s+")


@dataclass(frozen=True)
class Decision:
    """The write path's verdict for a new memory against its nearest same-kind neighbour."""

    action: Literal["insert", "duplicate", "supersede"]
    neighbour: Hit | None = None


def normalise_text(content: str, written_at: datetime) -> str:
    """Collapse whitespace, give relative time words ("today", "last week", "recently") absolute dates, and apply
    SQL's rule for NUL (`state.records.without_nul`) so the vector store holds the same text as SQL."""
    return absolute_dates(_SPACE.sub(" ", without_nul(content)).strip(), written_at)


def conflicts(new: str, old: str) -> bool:
    """Whether two statements about the same subject disagree: one negates what the other says, they carry
    different numbers, or each has words the other lacks (a changed value, e.g. "blue" → "green").
    A restatement with the same words, or one that only adds or drops detail, does not conflict."""
    if bool(_NEGATION.search(new)) != bool(_NEGATION.search(old)):
        return True
    if set(_NUMBER.findall(new)) != set(_NUMBER.findall(old)):
        return True
    a, b = set(terms(new)), set(terms(old))
    return bool(a - b) and bool(b - a)


def decide(text: str, neighbour: Hit | None, config: ArchivalConfig) -> Decision:
    """Insert, refresh a copy (cosine ≥ dedupe threshold, no conflict) or supersede (close, conflicting, and of a
    kind that states something that can change: a new episode never replaces an old one). Either needs a word
    in common with the neighbour."""
    if neighbour is None or neighbour.score < config.supersede_threshold:
        return Decision("insert")
    if not set(terms(text)) & set(terms(neighbour.record.text)):
        # Not one word in common: another subject, however close the vectors (MiniLM puts unrelated Chinese
        # sentences at cosine 0.97, so one fact replaced another; bench/RESULTS.md, "Bilingual retrieval").
        return Decision("insert")
    if neighbour.record.kind in config.supersede_kinds and conflicts(text, neighbour.record.text):
        return Decision("supersede", neighbour)
    if neighbour.score >= config.dedupe_threshold:
        return Decision("duplicate", neighbour)
    return Decision("insert")


def keyword_document(record: MemoryRecord, context: str = "") -> str:
    """What the keyword index matches for a memory: its text, the date it was written, in words, and the
    conversation it was filed from (`memory.filed_from`: indexed, never shown)."""
    return analysed(f"{record.created_at:%-d %B %Y %A} {record.text} {context}")
