"""The local embedding models run on our own onnxruntime session (`runtime.memory.onnx_text`) give the vectors
fastembed gave, to the bit, and a long text's working memory goes back to the system (issue 11 item 5)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from pagemind.runtime.memory import onnx_text
from pagemind.runtime.memory.embeddings import FastEmbedEmbedder
from pagemind.runtime.memory.model_profiles import MINILM, MULTILINGUAL_E5
from pagemind.runtime.memory.onnx_text import OnnxTextModel
from tests.test_multilingual import e5_models_dir  # noqa: F401 (the session fixture: e5 converted once)

ROOT = Path(__file__).parent.parent
REFERENCE = Path(__file__).parent / "fixtures" / "minilm_reference_vectors.npz"
TEXTS = ["The user is allergic to peanuts.", "", "ok", "日本語のテキスト 🎉 and emoji", "Dr. Lin: 10:30\n\ttabs",
         "我对花生过敏，一吃就起疹子。", " ".join(f"On day {i} Lin walked the dog by the river." for i in range(90))]


def _fastembed(folder: Path, name: str, custom: bool):
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    fastembed = pytest.importorskip("fastembed")
    if custom and name.lower() not in {m["model"].lower() for m in fastembed.TextEmbedding.list_supported_models()}:
        from fastembed.common.model_description import ModelSource, PoolingType

        fastembed.TextEmbedding.add_custom_model(name, pooling=PoolingType.MEAN, normalization=True, dim=384,
                                                 sources=ModelSource(hf=name), model_file="model.onnx")
    return fastembed.TextEmbedding(name, specific_model_path=str(folder), threads=1, lazy_load=False)


def _same_as_fastembed(folder: Path, name: str, custom: bool) -> None:
    reference, ours = _fastembed(folder, name, custom), OnnxTextModel(folder)
    for batch_size in (1, 3):  # one text per run (as pagemind embeds) and padded batches
        theirs = np.vstack(list(reference.embed(TEXTS, batch_size=batch_size)))
        mine = np.vstack(list(ours.embed(TEXTS, batch_size=batch_size)))
        assert mine.dtype == theirs.dtype == np.float32
        assert np.array_equal(mine, theirs), np.abs(mine - theirs).max()
    assert len(ours.tokenizer.encode(TEXTS[-1]).ids) == 512  # the long text is truncated where fastembed cuts it


def test_minilm_vectors_are_fastembeds_to_the_bit():
    _same_as_fastembed(MINILM.folder(Path()), MINILM.fastembed_name, custom=False)


def test_multilingual_e5_vectors_are_fastembeds_to_the_bit(e5_models_dir):  # noqa: F811
    _same_as_fastembed(MULTILINGUAL_E5.folder(e5_models_dir), MULTILINGUAL_E5.fastembed_name, custom=True)


def test_the_shipped_model_still_gives_the_stored_vectors():
    """Vectors stored from main before the change (fastembed 0.9.1, onnxruntime 1.32): the cache and the vector
    stores hold such vectors, so a new pipeline must reproduce them. The tolerance only allows another CPU's
    float rounding (the same machine reproduces them exactly)."""
    stored = np.load(REFERENCE)
    embedder = FastEmbedEmbedder()
    documents = embedder.embed([str(t) for t in stored["texts"]])
    assert np.allclose(documents, stored["documents"], rtol=0, atol=1e-5)
    assert np.allclose(embedder.embed_query("What is Lin allergic to?"), stored["query"], rtol=0, atol=1e-5)


def test_only_long_texts_shrink_the_arena(monkeypatch):
    short, long = "Lin likes tea.", " ".join(["tea"] * 300)
    with monkeypatch.context() as never:
        never.setattr(onnx_text, "SHRINK_ABOVE_TOKENS", 10_000)
        unshrunk = next(OnnxTextModel(MINILM.folder(Path())).embed([long]))
    model = OnnxTextModel(MINILM.folder(Path()))
    seen, released, threads = [], [], set()
    session = model.session

    class Spy:
        def run(self, names, feed, options=None):
            seen.append((feed["input_ids"].shape[1], options))
            threads.add(threading.current_thread().name)
            return session.run(names, feed, options)

    monkeypatch.setattr(model, "session", Spy())
    monkeypatch.setattr(onnx_text, "release_free_memory", lambda: released.append(True))
    assert np.array_equal(next(model.embed([long])), unshrunk)  # a shrink frees memory, it changes no number
    next(model.embed([short]))
    (long_tokens, long_options), (short_tokens, short_options) = seen
    assert long_tokens > onnx_text.SHRINK_ABOVE_TOKENS >= short_tokens
    assert long_options is model._shrink and short_options is None and released == [True]
    assert threads and all(name.startswith("pagemind-onnx") for name in threads)


def test_the_model_runs_on_its_own_few_threads_whoever_asks():
    """Each thread that runs a long text keeps its malloc arena's memory; callers come from many worker threads
    (asyncio.to_thread), so the session runs on at most `parallel_runs` threads of its own."""
    model = OnnxTextModel(MINILM.folder(Path()), parallel_runs=2)
    names, session = set(), model.session

    class Spy:
        def run(self, *args):
            names.add(threading.current_thread().name)
            return session.run(*args)

    model.session = Spy()
    texts = [f"text {i} " + "word " * (20 * i) for i in range(12)]
    alone = [next(OnnxTextModel(MINILM.folder(Path())).embed([t])) for t in texts[:2]]
    with ThreadPoolExecutor(max_workers=6) as callers:
        vectors = list(callers.map(lambda t: next(model.embed([t])), texts))
    assert len(names) <= 2 and all(name.startswith("pagemind-onnx") for name in names)
    assert np.array_equal(vectors[0], alone[0]) and np.array_equal(vectors[1], alone[1])


LONG_TEXTS = """
import json, gc
from pathlib import Path
from pagemind.runtime.memory.embeddings import FastEmbedEmbedder

def rss():
    gc.collect()
    return int(next(l for l in Path("/proc/self/status").read_text().splitlines() if l.startswith("VmRSS")).split()[1])

embedder = FastEmbedEmbedder()
embedder.embed(["Lin likes tea."])
loaded = rss()
for i in range(5):
    embedder.embed([" ".join(f"word{i}x{j}" for j in range(600))])
print(json.dumps({"loaded_kb": loaded, "after_kb": rss()}))
"""


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc and relies on glibc's malloc_trim")
def test_a_long_text_gives_its_working_memory_back():
    """A 512-token text needs ≈ 60 MB while it runs (attention over 512 × 512 positions); fastembed's session kept
    that much for good. Ours hands it back: the process grows by far less than one run's peak."""
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(LONG_TEXTS)], cwd=ROOT, capture_output=True,
                            text=True, timeout=120, env={**os.environ, "PAGEMIND_LOG_LEVEL": "ERROR"})
    assert result.returncode == 0, result.stderr
    sizes = json.loads(result.stdout.strip().splitlines()[-1])
    assert sizes["after_kb"] - sizes["loaded_kb"] < 20 * 1024, sizes
