"""Hybrid ranking shared by archival and recall memory: fuse keyword and dense scores, then weigh by age,
importance and usefulness; drop what does not beat noise.

Weighted score fusion, not reciprocal-rank fusion: on the LoCoMo dev conversations RRF of BM25 and dense was
worse than BM25 alone, while scores divided by their best and mixed 50/50 beat both (bench/RESULTS.md).
"""

from __future__ import annotations

import math
from datetime import datetime

import numpy as np


def scaled(scores: np.ndarray) -> np.ndarray:
    """Scores divided by the best one (all zeros stay zeros); negative scores count as zero."""
    scores = np.clip(np.asarray(scores, dtype=np.float64), 0, None)
    best = scores.max() if scores.size else 0.0
    return scores / best if best > 0 else scores


def fuse(keyword: np.ndarray, dense: np.ndarray, dense_weight: float) -> np.ndarray:
    """`(1 − w)·keyword/best + w·dense/best` over one candidate set."""
    return (1 - dense_weight) * scaled(keyword) + dense_weight * scaled(dense)


def beats_noise(keyword: np.ndarray, dense: np.ndarray, min_keyword: float, min_similarity: float) -> np.ndarray:
    """Which candidates are evidence at all: a real keyword match or a dense similarity above the noise floor."""
    keyword, dense = np.asarray(keyword), np.asarray(dense)
    return (keyword > min_keyword) | (dense >= min_similarity)


def recency(created_at: datetime, now: datetime, weight: float, half_life_days: float) -> float:
    """`1 − w + w·0.5^(age/half-life)`: 1 for a new memory, never below `1 − w`."""
    age_days = max(0.0, (now - created_at).total_seconds() / 86400)
    decay: float = 0.5 ** (age_days / half_life_days)  # a positive base: a real power
    return 1 - weight + weight * decay


def importance_factor(importance: float, weight: float) -> float:
    """`1 + w·(importance − 0.5)`: neutral at 0.5."""
    return 1 + weight * (importance - 0.5)


def usefulness(
    hit_count: int,
    boost: float,
    last_hit_at: datetime | None = None,
    now: datetime | None = None,
    half_life_days: float = 180.0,
) -> float:
    """`1 + b·log(1 + hits)·0.5^(days since the last hit / half-life)`: memories that keep being useful rise a
    little, and the lift fades when they stop being used."""
    fade = 1.0
    if last_hit_at is not None and now is not None:
        fade = 0.5 ** (max(0.0, (now - last_hit_at).total_seconds() / 86400) / half_life_days)
    return 1 + boost * math.log1p(max(0, hit_count)) * fade
