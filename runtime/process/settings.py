"""Process-wide configuration, read from the environment once and passed down explicitly."""

from __future__ import annotations

import os
from pathlib import Path

from pydantic import BaseModel


class SettingsError(ValueError):
    """An environment variable pagemind cannot use; the message names it and says what it takes."""


def _positive_int(env: dict[str, str], name: str) -> int | None:
    raw = env.get(name)
    if not raw:
        return None
    try:
        value = int(raw.strip())
    except ValueError:
        raise SettingsError(f"{name}={raw!r} is not a whole number (the embedding vectors' size, e.g. 384)") from None
    if value <= 0:
        raise SettingsError(f"{name}={raw!r} must be a positive whole number")
    return value


class Settings(BaseModel):
    """Where state lives and which endpoints to use. Built by `Settings.from_env()` at the edge (CLI, facade)."""

    home: Path
    database_url: str
    qdrant_url: str | None = None
    qdrant_api_key: str | None = None
    embedding_model: str | None = None
    embedding_base_url: str | None = None
    embedding_api_key: str | None = None
    embedding_dim: int | None = None
    models_dir: Path | None = None  # converted local embedding models; None: home/models

    @classmethod
    def from_env(cls, environ: dict[str, str] | None = None) -> Settings:
        """Settings from PAGEMIND_HOME, DATABASE_URL, QDRANT_URL, QDRANT_API_KEY, PAGEMIND_EMBEDDING_* and
        PAGEMIND_MODELS_DIR. _MODEL names a local model (all-MiniLM-L6-v2, the default, or multilingual-e5-small;
        converted ones live in PAGEMIND_MODELS_DIR, default $PAGEMIND_HOME/models) or an OpenAI-compatible
        endpoint's model (_BASE_URL, _API_KEY (default OPENAI_API_KEY), _DIM). Raises SettingsError for a value it
        cannot use."""
        env = dict(os.environ) if environ is None else environ
        home = Path(env.get("PAGEMIND_HOME") or "./.pagemind")
        database_url = env.get("DATABASE_URL") or f"sqlite:///{home / 'pagemind.db'}"
        if database_url.startswith("postgres://"):
            database_url = "postgresql://" + database_url.removeprefix("postgres://")
        if database_url.startswith("postgresql://"):
            database_url = "postgresql+psycopg://" + database_url.removeprefix("postgresql://")
        return cls(
            home=home,
            database_url=database_url,
            qdrant_url=env.get("QDRANT_URL") or None,
            qdrant_api_key=env.get("QDRANT_API_KEY") or None,
            embedding_model=env.get("PAGEMIND_EMBEDDING_MODEL") or None,
            embedding_base_url=env.get("PAGEMIND_EMBEDDING_BASE_URL") or None,
            embedding_api_key=env.get("PAGEMIND_EMBEDDING_API_KEY") or env.get("OPENAI_API_KEY") or None,
            embedding_dim=_positive_int(env, "PAGEMIND_EMBEDDING_DIM"),
            models_dir=Path(env["PAGEMIND_MODELS_DIR"]) if env.get("PAGEMIND_MODELS_DIR") else None,
        )
