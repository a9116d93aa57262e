"""Tuning presets (`memory.retrieval`): named bundles of `memory.advanced` values, for the embedding model in use.

    memory:
      retrieval: multilingual     # default | multilingual; unset: the embedding model's own

A preset gives values to fields of `memory.advanced.archival` and `memory.advanced.salience`; a field the YAML
sets to anything but its built-in default keeps the YAML's value (a value equal to the default counts as unset:
stored specs are full dumps, so "set in the YAML" cannot be told apart after a round trip). Left unset, the
preset is the embedding model's (`runtime.memory.embedding.profiles`: multilingual-e5-small brings
`multilingual`, all-MiniLM-L6-v2 `default`), applied when the agent's memory is wired.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, TypeVar

from pydantic import BaseModel

Retrieval = Literal["default", "multilingual"]
M = TypeVar("M", bound=BaseModel)


@dataclass(frozen=True)
class Preset:
    """One preset: what it is for, and the values it gives each section."""

    name: str
    description: str
    archival: Mapping[str, Any] = field(default_factory=dict)
    salience: Mapping[str, Any] = field(default_factory=dict)


# multilingual (bench/RESULTS.md, "Bilingual: multilingual-e5-small as a configured model"): with e5, two different
# memories of one person score 0.78 (median) to 0.93 (highest of 93), a restatement or a changed number 0.98–0.99,
# and 97 % of the right answers to a question ≥ 0.78 (the wrong ones: median 0.77). So supersede at 0.95, dedupe at
# 0.97 (both between the two), and the noise floor at 0.78 (MiniLM's 0.30 filters nothing with e5). Variety in
# conversation_search's head (MMR, `recall_diversity`) is off: it penalises by cosine, and with every pair of e5
# vectors at 0.8 or above the penalty mostly adds noise (bilingual set, recall hybrid hit@5 0.74 with 0.4, 0.78
# off). The salience rules read Chinese as they read English: both presets leave them alone.
PRESETS: dict[str, Preset] = {
    "default": Preset(
        "default", "English with all-MiniLM-L6-v2 (the default embedding model): every knob at its documented default"
    ),
    "multilingual": Preset(
        "multilingual",
        "Chinese and 100 other languages with multilingual-e5-small, whose cosines sit high (unrelated texts ≈ 0.8)",
        archival={
            "min_similarity": 0.78,
            "dedupe_threshold": 0.97,
            "supersede_threshold": 0.95,
            "recall_diversity": 0.0,
        },
    ),
}


@functools.cache
def _default(cls: type[BaseModel], name: str) -> Any:
    return cls.model_fields[name].get_default(call_default_factory=True)


def apply_preset(config: M, values: Mapping[str, Any]) -> M:
    """`config` with `values` in place of the fields it leaves at their defaults (the others are the YAML's)."""
    cls = type(config)
    update = {name: value for name, value in values.items() if getattr(config, name) == _default(cls, name)}
    return config.model_copy(update=update) if update else config
