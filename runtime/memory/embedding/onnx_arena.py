"""Giving back what a long text's run leaves in onnxruntime's CPU arena, for the session fastembed builds.

onnxruntime's CPU arena keeps the peak of the largest input it has run: attention over 512 × 512 positions leaves
≈ 63 MB in a process that embedded one long text, and a 256-token text ≈ 17 MB (bench/RESULTS.md, "Process
memory"). fastembed builds the session and runs it with no run options, so `shrink_after_long_runs` puts a
`ShrinkingSession` in front of the session fastembed holds: a run larger than one `SHRINK_ABOVE_TOKENS`-token text
asks the arena to give back its free chunks at its end (`memory.enable_memory_arena_shrinkage`), and the C heap
is trimmed after it (the chunks sit under glibc's dynamic mmap threshold, so they would otherwise stay). Smaller
runs go through untouched: the arena keeps ≤ 4.5 MB for them and reuses it, as before. fastembed still tokenises,
runs, pools and normalises; the vectors are the same to the bit
(tests/runtime/memory/embedding/test_embedding_vectors.py).

fastembed's own switch, `enable_cpu_mem_arena=False`, gives the same resident size after a run but a transient
peak 1.6–1.8× higher (every tensor of a run comes from malloc: ≈ 380 MB against ≈ 225 MB with the arena) and
long texts ≈ 1.6× the CPU; this costs ≈ 1.3× the CPU of a long text (its pages are faulted in again).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import structlog

from pagemind.runtime.process.heap import limit_malloc_arenas, release_free_memory

log = structlog.get_logger("pagemind.embeddings")

SHRINK_ABOVE_TOKENS = 128
"""Runs above one text of this length (batch × length², the attention's size) give their arena memory back."""


class ShrinkingSession:
    """An `onnxruntime.InferenceSession` whose large runs give their arena memory back (see the module docstring).
    Everything but `run` is the session's own."""

    def __init__(self, session: Any):
        import onnxruntime as ort

        self.session = session
        self.shrink = ort.RunOptions()
        self.shrink.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")

    def __getattr__(self, name: str) -> Any:
        return getattr(self.session, name)

    def run(self, output_names: Sequence[str] | None, input_feed: Mapping[str, Any], run_options: Any = None) -> Any:
        """The session's run; one larger than a `SHRINK_ABOVE_TOKENS`-token text shrinks the arena after it."""
        if run_options is not None or not is_large(input_feed):
            return self.session.run(output_names, input_feed, run_options)
        try:
            return self.session.run(output_names, input_feed, self.shrink)
        finally:
            release_free_memory()


def is_large(input_feed: Mapping[str, Any]) -> bool:
    """Whether a run's attention (batch × length²) is larger than one `SHRINK_ABOVE_TOKENS`-token text's."""
    shape = np.shape(input_feed.get("input_ids", ()))
    if len(shape) != 2:
        return False
    batch, length = shape
    large: bool = batch * length * length > SHRINK_ABOVE_TOKENS**2
    return large


def keep_model_memory_small(embedding: Any) -> None:
    """Once a fastembed `TextEmbedding` is loaded: hand back the C heap's free pages its loading left (≈ 8 MB),
    shrink its arena after large runs (`shrink_after_long_runs`) and cap glibc's malloc arenas, since embeddings
    run in whichever worker thread asks (`heap.limit_malloc_arenas`)."""
    shrink_after_long_runs(embedding)
    limit_malloc_arenas()
    release_free_memory()


def shrink_after_long_runs(embedding: Any) -> bool:
    """Put a `ShrinkingSession` in front of a loaded fastembed `TextEmbedding`'s onnxruntime session (held at
    `embedding.model.model` in fastembed 0.9). False, with a warning, when it is not there: the model then runs
    as fastembed runs it, and a long text's arena peak stays."""
    import onnxruntime as ort

    text_model: Any = getattr(embedding, "model", None)
    session = getattr(text_model, "model", None)
    if isinstance(session, ShrinkingSession):
        return True
    if not isinstance(session, ort.InferenceSession):
        log.warning(
            "embedder_arena_not_shrunk",
            reason="fastembed's session not found at TextEmbedding.model.model",
            found=type(session).__name__,
        )
        return False
    text_model.model = ShrinkingSession(session)
    return True
