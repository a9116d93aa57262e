"""The embedding model's memory (issue 11, process RSS): a long text's run gives onnxruntime's arena memory back,
short runs go through as fastembed runs them, and the vectors stay those of tests/runtime/memory/embedding/test_embedding_vectors.py."""

from __future__ import annotations

import gc
from pathlib import Path

import numpy as np
from structlog.testing import capture_logs

from pagemind.runtime.memory.embedding.local_model import FastEmbedEmbedder
from pagemind.runtime.memory.embedding.onnx_arena import SHRINK_ABOVE_TOKENS, ShrinkingSession, shrink_after_long_runs

SHRINK = "memory.enable_memory_arena_shrinkage"
LONG_TEXT = " ".join(
    f"On day {i} Lin walked the dog by the river and called her sister about the move." for i in range(40)
)  # truncated at the model's 512 tokens


class RecordingSession:
    """Stands in for an `onnxruntime.InferenceSession`: records the run options of each run."""

    def __init__(self) -> None:
        self.options: list[object] = []

    def run(self, output_names, input_feed, run_options=None):
        self.options.append(run_options)
        return ["out"]

    def get_inputs(self) -> list[str]:
        return ["input_ids"]


def feed(batch: int, tokens: int) -> dict[str, np.ndarray]:
    return {"input_ids": np.zeros((batch, tokens), dtype=np.int64)}


def test_only_runs_larger_than_one_short_text_ask_the_arena_to_shrink():
    inner = RecordingSession()
    session = ShrinkingSession(inner)
    assert session.run(None, feed(1, SHRINK_ABOVE_TOKENS)) == ["out"]
    session.run(None, feed(1, SHRINK_ABOVE_TOKENS + 1))
    session.run(None, feed(2, SHRINK_ABOVE_TOKENS))  # two texts: twice one text's attention
    session.run(None, feed(1, 500), run_options="the caller's")
    short, long, batch, callers = inner.options
    assert short is None
    assert long.get_run_config_entry(SHRINK) == "cpu:0" and batch is long
    assert callers == "the caller's"
    assert session.get_inputs() == ["input_ids"]  # everything else is the session's own


def anonymous_mb() -> float:
    gc.collect()
    for line in Path("/proc/self/smaps_rollup").read_text().splitlines():
        if line.startswith("Anonymous:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no Anonymous line in smaps_rollup")


def test_a_long_text_leaves_no_arena_peak_behind():
    """Without the shrink, onnxruntime's arena keeps ≈ 63 MB after one 512-token text (bench/RESULTS.md)."""
    embedder = FastEmbedEmbedder()
    embedder.embed(["Lin is allergic to peanuts."])
    assert isinstance(embedder._model.model.model, ShrinkingSession)
    before = anonymous_mb()
    [vector] = embedder.embed([LONG_TEXT])
    assert anonymous_mb() - before < 16
    assert abs(float(vector @ vector) - 1) < 1e-5


def test_a_fastembed_without_the_session_where_expected_runs_unchanged_and_says_so():
    class Elsewhere:
        model = object()

    with capture_logs() as logs:
        assert shrink_after_long_runs(Elsewhere()) is False
    assert [e["event"] for e in logs] == ["embedder_arena_not_shrunk"]
