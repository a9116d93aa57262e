"""Text embeddings: the `Embedder` interface every model implements, and what callers do with one.

    embedder = build_embedder(settings, engine)      # `embedding.configured`: cached; offline by default
    vectors = await aembed(embedder, ["The user is allergic to peanuts."])   # (n, dim) float32, unit length

The embedders: local models run by fastembed (`embedding.local_model`: the shipped all-MiniLM-L6-v2, or a converted
model such as multilingual-e5-small), an OpenAI-compatible endpoint (`embedding.endpoint`), and the cache that wraps
either (`embedding.cache`), so the same text is never embedded twice. Which one the settings choose:
`embedding.configured`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Sequence
from typing import Protocol, runtime_checkable

import numpy as np


class EmbeddingError(RuntimeError):
    """The embedding model could not be loaded or called."""


@runtime_checkable
class Embedder(Protocol):
    """Turns texts into unit-length vectors. `model_id` names the model (cache key and store name)."""

    model_id: str

    @property
    def dim(self) -> int:
        """The vector size (an attribute or a property)."""
        ...

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts synchronously: a float32 array of shape (len(texts), dim), rows of unit length."""
        ...


def normalise(vectors: np.ndarray) -> np.ndarray:
    """Rows scaled to unit length (zero rows stay zero), as float32."""
    vectors = np.asarray(vectors, dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    return vectors / np.where(norms == 0, 1.0, norms)


def batched(items: Sequence[str], size: int) -> Iterable[Sequence[str]]:
    """Consecutive slices of at most `size` items."""
    for start in range(0, len(items), size):
        yield items[start : start + size]


async def aembed(embedder: Embedder, texts: Sequence[str]) -> np.ndarray:
    """Embed off the event loop (ONNX releases the GIL while it computes)."""
    return await asyncio.to_thread(embedder.embed, list(texts))


def query_vector(embedder: Embedder, text: str) -> np.ndarray:
    """One search query's vector: from the in-process cache or the model, never SQL (a query is rarely repeated
    across processes, and a cache read and write there cost more than the model does: ≈ 2 ms)."""
    embed_query = getattr(embedder, "embed_query", None)
    vector: np.ndarray = embed_query(text) if embed_query is not None else embedder.embed([text])[0]
    return vector
