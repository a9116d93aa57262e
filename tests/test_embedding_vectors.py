"""The shipped model's vectors do not drift: the cache and the vector stores hold vectors made by earlier
versions, so a change of how the model is run (session options, memory handling, a fastembed upgrade) must
reproduce them."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pagemind.runtime.memory.embeddings import FastEmbedEmbedder

REFERENCE = Path(__file__).parent / "fixtures" / "minilm_reference_vectors.npz"


def test_the_shipped_model_still_gives_the_stored_vectors():
    """Vectors stored from main on 2026-12-01 (fastembed 0.9.1, onnxruntime 1.32). The tolerance only allows
    another CPU's float rounding (the same machine reproduces them exactly)."""
    stored = np.load(REFERENCE)
    embedder = FastEmbedEmbedder()
    documents = embedder.embed([str(t) for t in stored["texts"]])
    assert np.allclose(documents, stored["documents"], rtol=0, atol=1e-5)
    assert np.allclose(embedder.embed_query("What is Lin allergic to?"), stored["query"], rtol=0, atol=1e-5)
