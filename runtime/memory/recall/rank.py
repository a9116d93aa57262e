"""Recall ranking beyond the fused score (`memory.recall`): the next turn, who is speaking, variety in the head.

- **Next turn**: a share of the next message's score is added (a message whose reply matches is likely the one
  asked about).
- **Speaker**: transcripts label each turn with its speaker ("Caroline: …"). A question that names a speaker
  ("What did Caroline paint?") is mostly answered by that speaker's own turns, yet keyword search barely counts the
  name: it is in every turn of that speaker and, through the keyed previous turn, in most of the other's, so it
  does not tell them apart (Postgres' ts_rank has no IDF at all). Turns whose speaker the query names get
  `score × (1 + boost)`. Nothing happens when no label matches.
- **Variety**: questions about several facts ("What activities has Melanie done?") want different turns, and
  near-copies of one turn crowd the top. The head of the ranking is re-ordered greedily (maximal marginal relevance):
  each next pick is the one whose `score × (1 − w·max cosine to the ones picked)` is best.

Defaults and their measurements: bench/RESULTS.md ("Recall ranking: speaker, variety"). Where the query names
no speaker and the messages carry no labels (a plain user/assistant chat), only the next-turn share and variety act.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from pagemind.runtime.memory.retrieval.speakers import speaker

_WORD = re.compile(r"[\w'’-]+", re.UNICODE)


class Speakers:
    """The speaker labels of an ordered list of messages, as codes (0: no label), for matching queries."""

    def __init__(self) -> None:
        self.codes = np.zeros(0, dtype=np.int32)
        self._labels: dict[str, int] = {"": 0}

    def add(self, texts: Sequence[str]) -> None:
        """Append the labels of more messages (in index order)."""
        fresh = [self._labels.setdefault(speaker(text), len(self._labels)) for text in texts]
        self.codes = np.concatenate([self.codes, np.asarray(fresh, dtype=np.int32)])

    def named(self, query: str) -> np.ndarray:
        """1.0 for each message whose speaker the query names (whole words, any case), else 0.0."""
        words = [w[:-2] if w.endswith(("'s", "’s")) else w for w in _WORD.findall(query.lower())]
        wanted = {
            self._labels[g]
            for n in (1, 2, 3)
            for g in (" ".join(words[i : i + n]) for i in range(len(words)))
            if g in self._labels and g
        }
        if not wanted:
            return np.zeros(len(self.codes))
        return np.isin(self.codes, list(wanted)).astype(np.float64)


def with_next(scores: np.ndarray, next_index: np.ndarray | Sequence[int], weight: float) -> np.ndarray:
    """Add `weight` × the next message's score (same session) to each message's score."""
    if weight <= 0 or not len(scores):
        return scores
    nxt = np.asarray(next_index)
    bonus = np.where(nxt >= 0, scores[np.clip(nxt, 0, None)], 0.0)
    return scores + weight * bonus


def speaker_boost(scores: np.ndarray, named: np.ndarray, boost: float) -> np.ndarray:
    """`score × (1 + boost)` for the messages whose speaker the query names."""
    return scores * (1 + boost * named) if boost > 0 else scores


def diversify(scored: list[tuple[int, float]], vectors: np.ndarray, weight: float) -> list[tuple[int, float]]:
    """`scored` (best first, one row of `vectors` each) re-ordered by maximal marginal relevance: each pick is
    the item with the best `score × (1 − weight · max(0, cosine to the items already picked))`. Scores are kept."""
    if weight <= 0 or len(scored) < 3:
        return scored
    similar = np.clip(vectors @ vectors.T, 0, None)
    relevance = np.array([max(s, 0.0) for _, s in scored])
    penalty = np.zeros(len(scored))
    left = list(range(len(scored)))
    order: list[int] = []
    while left:
        gains = relevance[left] * (1 - weight * penalty[left])
        pick = left.pop(int(np.argmax(gains)))  # argmax takes the first of ties: the original order
        order.append(pick)
        penalty = np.maximum(penalty, similar[pick])
    return [scored[n] for n in order]
