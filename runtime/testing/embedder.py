"""`FakeEmbedder`: an embedder whose vectors the test chooses, deterministic pseudo-random ones otherwise."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Sequence

import numpy as np


class FakeEmbedder:
    """An `Embedder` whose vectors the test chooses, so similarities sit exactly where a test needs them.

    A text in `vectors` gets its vector; any other text a fixed pseudo-random unit vector (seeded by the text) in
    the upper half of the space, so vectors chosen in the lower half stay far from them. Keeps every text it
    embedded (`texts`) and counts calls; with a `barrier`, each call waits there (for tests of concurrency)."""

    model_id: str = "fake"
    dim: int = 64

    def __init__(
        self,
        vectors: dict[str, np.ndarray] | None = None,
        *,
        dim: int | None = None,
        model_id: str | None = None,
        barrier: threading.Barrier | None = None,
    ):
        self.vectors = dict(vectors or {})
        self.dim = dim or self.dim
        self.model_id = model_id or self.model_id
        self.barrier = barrier
        self.calls = 0
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One unit vector per text, as a float32 array of shape (len(texts), dim)."""
        self.calls += 1
        self.texts += list(texts)
        if self.barrier is not None:
            self.barrier.wait(timeout=10)  # two calls meet here only if they run at the same time
        return np.vstack([self.vector(t) for t in texts]) if texts else np.zeros((0, self.dim), np.float32)

    def vector(self, text: str) -> np.ndarray:
        """The vector for one text."""
        if text in self.vectors:
            return self.vectors[text]
        seed = int(hashlib.sha256(text.encode()).hexdigest()[:12], 16)
        v = np.zeros(self.dim, dtype=np.float32)
        v[self.dim // 2 :] = np.random.default_rng(seed).normal(size=self.dim - self.dim // 2)
        return v / np.linalg.norm(v)
