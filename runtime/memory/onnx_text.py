"""A local sentence-embedding model run on onnxruntime: fastembed's pipeline, without importing fastembed.

    model = OnnxTextModel(folder, threads=1)
    vectors = model.embed(["The user is allergic to peanuts."])   # (n, dim) float32, unit length

fastembed's import alone costs ≈ 21 MB of resident memory in an agent process (requests, huggingface_hub, loguru,
PIL, rich and its own image, sparse and rerank models: bench/RESULTS.md, "Process memory"), of a 200 MB budget, for
three steps we need from it. They are done here the way fastembed 0.9 does them, so a text's vector is the same
to the bit (tests/test_onnx_text.py compares the two on both local models):

- the tokenizer from the folder's `tokenizer.json`, truncated at the config's `model_max_length`, its special
  tokens added and padding to the longest text of a batch (`load_tokenizer`);
- `input_ids`, `attention_mask` and zero `token_type_ids` as int64, through a session with every graph
  optimisation on and `threads` threads;
- mean pooling over the real tokens (summed in float64), L2 normalisation, cast back to float32.

Owning the session also lets a long text give its memory back: onnxruntime's CPU arena keeps the peak of the
longest input it has seen (≈ 60 MB for a 512-token text: twelve 512 × 512 attention matrices per layer), so a
run whose input is longer than `SHRINK_ABOVE_TOKENS` asks the arena to shrink when it ends, and the C heap to hand
the freed pages back (`release_free_memory`). Shorter runs keep the arena as it is (re-faulting its pages on every
short run would cost more CPU than the model does). The session runs on `PARALLEL_RUNS` threads of its own, so
that the threads that have held a long text's memory are few.
"""

from __future__ import annotations

import json
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, Iterator, Sequence

import numpy as np

from pagemind.runtime.heap import release_free_memory

# Above this many tokens a run's working memory (≈ 4 MB at 128 tokens, 14 MB at 250) is handed back when it ends.
SHRINK_ABOVE_TOKENS = 128
# The model runs on this many threads of its own, whichever threads ask for vectors: every thread that has run a
# long text keeps ≈ 6 MB in its glibc malloc arena (bench/agent_memory.py: ten texts at once from six worker
# threads left 37–43 MB behind, from one or two threads 2 MB). The handoff costs ≈ 0.1 ms of CPU, ≈ 6 % of a
# 14-token text's; handing off only the long texts saved that but left ≈ 10 MB behind under the same load.
PARALLEL_RUNS = max(1, min(2, os.cpu_count() or 1))


class OnnxTextModel:
    """A mean-pooled, normalised text-embedding model from a folder (model.onnx, tokenizer.json and its configs)."""

    def __init__(self, folder: Path, *, threads: int = 1, model_file: str = "model.onnx",
                 parallel_runs: int = PARALLEL_RUNS):
        import onnxruntime as ort

        self.folder = Path(folder)
        self.tokenizer = load_tokenizer(self.folder)
        options = ort.SessionOptions()
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = threads
        self.session = ort.InferenceSession(str(self.folder / model_file), sess_options=options,
                                            providers=["CPUExecutionProvider"])
        self.input_names = {node.name for node in self.session.get_inputs()}
        self._shrink = ort.RunOptions()
        self._shrink.add_run_config_entry("memory.enable_memory_arena_shrinkage", "cpu:0")
        self._runner = ThreadPoolExecutor(max_workers=parallel_runs, thread_name_prefix="pagemind-onnx")
        release_free_memory()  # what building the session parsed and copied: ≈ 8 MB

    def embed(self, texts: Sequence[str], batch_size: int = 1) -> Iterator[np.ndarray]:
        """One unit-length float32 vector per text, `batch_size` texts per run (padding is per batch, so with an
        int8 model a text's vector depends on the texts batched with it: see FastEmbedEmbedder)."""
        texts = list(texts)
        for start in range(0, len(texts), batch_size):
            yield from self._run(texts[start:start + batch_size])

    def _infer(self, feed: dict[str, np.ndarray], long: bool) -> np.ndarray:
        output = self.session.run(None, feed, self._shrink if long else None)[0]
        if long:
            release_free_memory()
        return output

    def _run(self, texts: list[str]) -> np.ndarray:
        encoded = self.tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encoded], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
        feed: dict[str, np.ndarray] = {"input_ids": ids}
        if "attention_mask" in self.input_names:
            feed["attention_mask"] = mask
        if "token_type_ids" in self.input_names:
            feed["token_type_ids"] = np.zeros_like(ids)
        output = self._runner.submit(self._infer, feed, ids.shape[1] > SHRINK_ABOVE_TOKENS).result()
        return normalize(mean_pooling(output, mask)).astype(output.dtype, copy=False)


def mean_pooling(output: np.ndarray, mask: np.ndarray) -> np.ndarray:
    """The mean of the real tokens' vectors (the mask's ones), summed in float64 as fastembed does."""
    summed = np.sum(output, axis=1, where=mask[:, :, np.newaxis].astype(bool), dtype=np.float64)
    return summed / np.maximum(np.sum(mask, axis=1, keepdims=True), 1e-9)


def normalize(vectors: np.ndarray, eps: float = 1e-12) -> np.ndarray:
    """Rows divided by their L2 norm (at least `eps`)."""
    return vectors / np.maximum(np.linalg.norm(vectors, ord=2, axis=1, keepdims=True), eps)


def load_tokenizer(folder: Path) -> Any:
    """The folder's tokenizer set up as fastembed sets it up: truncation at the stricter of `model_max_length` and
    `max_length`, the special tokens map's tokens added, padding to the longest text with the configured pad
    token, each direction from tokenizer_config.json, else tokenizer.json, else right."""
    from tokenizers import AddedToken, Tokenizer

    config = _json(folder / "config.json", required=False)
    tokenizer_config = _json(folder / "tokenizer_config.json")
    contexts = [v for v in (tokenizer_config.get("model_max_length"), tokenizer_config.get("max_length"))
                if isinstance(v, int) and not isinstance(v, bool) and 0 < v <= sys.maxsize]
    if not contexts:
        raise ValueError(f"no maximum context length in {folder / 'tokenizer_config.json'}")
    tokenizer = Tokenizer.from_file(str(folder / "tokenizer.json"))
    truncation = tokenizer.truncation or {}
    tokenizer.enable_truncation(max_length=min(contexts), direction=tokenizer_config.get("truncation_side")
                                or truncation.get("direction", "right"))
    for token in _special_tokens(_json(folder / "special_tokens_map.json", required=False)):
        if isinstance(token, (str, dict)):
            tokenizer.add_special_tokens([token if isinstance(token, str) else AddedToken(**token)])
    padding = tokenizer.padding or {}
    pad_token = padding.get("pad_token") or tokenizer_config.get("pad_token")
    if pad_token is None:
        raise ValueError(f"no pad token for {folder}")
    pad_id = padding.get("pad_id", config.get("pad_token_id"))
    pad_id = tokenizer.token_to_id(pad_token) if pad_id is None else pad_id
    if pad_id is None:
        raise ValueError(f"no id for the pad token {pad_token!r} in {folder}")
    tokenizer.enable_padding(direction=tokenizer_config.get("padding_side") or padding.get("direction", "right"),
                             pad_id=pad_id, pad_type_id=padding.get("pad_type_id", 0), pad_token=pad_token,
                             pad_to_multiple_of=padding.get("pad_to_multiple_of"), length=None)
    return tokenizer


def _special_tokens(tokens_map: dict[str, Any]) -> Iterator[Any]:
    for value in tokens_map.values():
        yield from value if isinstance(value, list) else [value]


def _json(path: Path, *, required: bool = True) -> dict[str, Any]:
    if not path.exists():
        if required:
            raise ValueError(f"{path} is missing")
        return {}
    return json.loads(path.read_text())
