"""A search's second round and its time boost, shared by recall and archival search (no model call).

Multi-hop: a question often names one fact and needs another ("What did the author of *Dune* study?"). When the
first round's best results name entities the question does not (capitalised names, quoted titles, 《书名》), one
more round runs with the question plus those entities, and the rounds are fused: each round's scores divided by
its best, the second weighted (`MultiHopConfig.weight`), summed, so the first round's good hits stay on top. At
most two rounds, ever. Then every result is weighed by the time the question names (`memory.query_time`).

Items are anything with `id`, `text` and `created_at` (an archival `MemoryRecord`, a recall `IndexedMessage`).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Protocol, TypeVar

import structlog

from pagemind.runtime.memory.retrieval.keywords import STOP_WORDS
from pagemind.runtime.memory.retrieval.query_time import TimeQuery, parse_query_time, time_factor
from pagemind.runtime.memory.retrieval.speakers import without_speaker
from pagemind.runtime.spec.memory import ArchivalConfig

log = structlog.get_logger("pagemind.rounds")


class Item(Protocol):
    """A search result as the rounds see it."""

    @property
    def id(self) -> object: ...
    @property
    def text(self) -> str: ...
    @property
    def created_at(self) -> datetime: ...


T = TypeVar("T", bound=Item)
Ranked = list[tuple[float, T]]

_NAME = re.compile(r"(?<!^)\b([A-Z][a-z]+(?:[ -][A-Z][a-z]+)*)\b")  # not a sentence's first word
_QUOTED = re.compile(r"[\"“《「『]([^\"”》」』]{2,60})[\"”》」』]")
_COMMON = frozenset(
    """i i'm i've i'll i'd it's that's what's let's ok okay thanks thank wow hey hi hello yes yeah no
sure great awesome cool nice good sounds oh omg lol haha hmm well also glad congrats congratulations sorry anyway
monday tuesday wednesday thursday friday saturday sunday january february march april may june july august september
october november december mom dad""".split()
)


def entities(text: str) -> list[str]:
    """Names a text gives: capitalised words not opening a sentence ("Lin", "New York", "Harry Potter") and quoted
    titles ("Dune", 《三体》), in order, without repeats. A leading speaker label ("Caroline: …") is not one."""
    text = without_speaker(text)
    found = [m[1].strip() for m in _QUOTED.finditer(text)]
    for sentence in re.split(r"(?<=[.!?。！？])\s*", text):
        found += [m[1] for m in _NAME.finditer(sentence.strip())]
    return [e for e in dict.fromkeys(found) if e.lower() not in _COMMON and e.lower() not in STOP_WORDS]


def new_entities(query: str, texts: Sequence[str], limit: int) -> list[str]:
    """Entities the texts name that the query does not (case-insensitive), the most often named first, at most
    `limit`."""
    asked = query.lower()
    counts: dict[str, int] = {}
    for text in texts:
        for name in entities(text):
            if name.lower() not in asked:
                counts[name] = counts.get(name, 0) + 1
    return sorted(counts, key=lambda n: -counts[n])[:limit]


def fuse_rounds(first: Ranked[T], second: Ranked[T], weight: float) -> Ranked[T]:
    """`score₁/best₁ + weight·score₂/best₂` over both rounds' results (a result missing from one scores 0 there),
    best first."""
    items: dict[object, T] = {}
    fused: dict[object, float] = {}
    for ranked, share in ((first, 1.0), (second, weight)):
        best = max((s for s, _ in ranked), default=0.0)
        for score, item in ranked:
            items.setdefault(item.id, item)
            fused[item.id] = fused.get(item.id, 0.0) + (share * score / best if best > 0 else 0.0)
    return sorted(((fused[i], items[i]) for i in items), key=lambda pair: -pair[0])


def time_asked(query: str, now: datetime, config: ArchivalConfig) -> TimeQuery:
    """What the query says about time, or an empty (false) TimeQuery when the time boosts are off."""
    temporal = config.temporal
    return parse_query_time(query, now) if temporal.range_boost or temporal.when_boost else TimeQuery()


def refine(
    query: str,
    first: Ranked[T],
    again: Callable[[str], Ranked[T]],
    now: datetime,
    config: ArchivalConfig,
    *,
    asked: TimeQuery | None = None,
) -> Ranked[T]:
    """The first round's ranked results, fused with a second round when they name new entities
    (`config.multihop`), then weighed by the time the query names (`config.temporal`; `asked` when the caller
    read it already), best first. `again` runs one more round for a query; it is called at most once."""
    ranked, hop = first, config.multihop
    if hop.enabled and first:
        names = new_entities(query, [item.text for _, item in first[: hop.from_top]], hop.max_entities)
        if names:
            ranked = fuse_rounds(first, again(f"{query} {' '.join(names)}"), hop.weight)
            log.info("search_second_round", entities=names, candidates=len(ranked))
    temporal = config.temporal
    asked = time_asked(query, now, config) if asked is None else asked
    if not asked:
        return ranked
    weighed = [
        (score * time_factor(item.created_at, item.text, asked, temporal.range_boost, temporal.when_boost), item)
        for score, item in ranked
    ]
    log.info("search_time_boost", ranges=[r.phrase for r in asked.ranges], asks_when=asked.asks_when)
    return sorted(weighed, key=lambda pair: -pair[0])
