"""The shipped model's vectors do not drift: the cache and the vector stores hold vectors made by earlier
versions, so a change of how the model is run (session options, memory handling, a fastembed upgrade) must
reproduce them."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from pagemind.runtime.memory.embedding.local_model import FastEmbedEmbedder

REFERENCE = Path(__file__).parents[3] / "fixtures" / "minilm_reference_vectors.npz"


def test_the_shipped_model_still_gives_the_stored_vectors():
    """Vectors stored from main on 2026-12-01 (fastembed 0.9.1, onnxruntime 1.32). The same machine reproduces
    them exactly; the tolerance allows another CPU's int8 kernels: made on a CPU with AVX-512, they differ on an
    AVX2-only one by up to 0.0033 per component (cosine ≥ 0.9997). What the test is for moves them far more: the
    same texts embedded 8 to a batch (activations quantised per batch) differ by up to 0.043 (cosine 0.964)."""
    stored = np.load(REFERENCE)
    embedder = FastEmbedEmbedder()
    documents = embedder.embed([str(t) for t in stored["texts"]])
    query = embedder.embed_query("What is Lin allergic to?")
    for made, kept in [*zip(documents, stored["documents"]), (query, stored["query"])]:
        assert float(made @ kept) >= 0.999 and np.abs(made - kept).max() <= 0.01


def test_a_change_in_how_texts_are_run_is_caught():
    """The tolerance above is tight enough: batching the same texts (one way to run the model differently)
    fails it."""
    stored = np.load(REFERENCE)
    texts = [str(t) for t in stored["texts"]]
    batched = FastEmbedEmbedder(batch_size=len(texts)).embed(texts)
    assert any(
        float(made @ kept) < 0.999 or np.abs(made - kept).max() > 0.01
        for made, kept in zip(batched, stored["documents"])
    )
