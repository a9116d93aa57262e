"""What `AgentSpec.spec_hash` covers: the definition as it behaves, in the shape agents were first stored with.

The hash decides whether a stored agent is "unchanged" (`state.agent_load.read_unchanged` skips every write,
the daemon's pool keeps a loaded agent, the catalog accepts a half-made agent as its own), so a change of shape
must not change it: every stored agent would count as edited at once. It is therefore taken over the *resolved*
configuration (preset and `advanced` applied), spelled as before the tiers (`memory.archival`, `prefetch_top_k`,
`recall_session_gap_hours` inside `archival`): a file written with old names, its new-name equivalent and the
stored dump of either give one hash, and every agent stored before keeps its own. Two more rules keep it stable:

- fields added after agents existed (each class's `LATER_FIELDS`) are left out while at their defaults;
- a new knob that is not at its default changes the hash (it changes behaviour), `memory.retrieval` included.
"""

from __future__ import annotations

import functools
from typing import Any

from pydantic import BaseModel

# ArchivalConfig's fields in the order agents were first stored with, under their old names.
LEGACY_ARCHIVAL_ORDER = (
    "enabled",
    "dense_weight",
    "min_similarity",
    "min_keyword_score",
    "prefetch",
    "top_k",
    "max_top_k",
    "recency_weight",
    "recency_half_life_days",
    "importance_weight",
    "default_importance",
    "hit_boost",
    "dedupe_threshold",
    "supersede_threshold",
    "supersede_kinds",
    "max_memory_chars",
    "context_messages",
    "context_chars",
    "keyword_avg_len",
    "neighbour_weight",
    "neighbour_seconds",
    "recall_dense",
    "recall_own_text_weight",
    "recall_next_weight",
    "recall_context_messages",
    "recall_session_gap_hours",
    "recall_speaker_boost",
    "recall_diversity",
    "recall_diversity_depth",
    "expiry",
    "temporal",
    "multihop",
)


@functools.cache
def later_default(cls: type[BaseModel], name: str) -> Any:
    """A later field's default, built once and only compared with: a default factory builds a new model at every
    call, which made `spec_hash` cost 0.4 ms (a daemon loading an agent computes it twice)."""
    return cls.model_fields[name].get_default(call_default_factory=True)


def later_defaults(model: BaseModel, skip: frozenset[str] = frozenset()) -> dict[Any, Any]:
    """A `model_dump` exclude for the fields added after agents existed (each class's `LATER_FIELDS`) that are
    still at their defaults, at any depth. A model whose fingerprint has another shape than its fields (the
    `memory:` section) gives the exclude for that shape (its `fingerprint_exclude`). Fields in `skip` are not
    looked at."""
    custom = getattr(model, "fingerprint_exclude", None)
    if callable(custom):
        return dict(custom())
    fields = type(model).model_fields
    exclude: dict[Any, Any] = {
        name: True
        for name in getattr(model, "LATER_FIELDS", ())
        if getattr(model, name) == later_default(type(model), name)
    }
    for name in fields.keys() - exclude.keys() - skip:
        value = getattr(model, name)
        if isinstance(value, BaseModel):
            inner = later_defaults(value)
        elif isinstance(value, list):
            inner = {
                i: e for i, item in enumerate(value) if isinstance(item, BaseModel) and (e := later_defaults(item))
            }
        else:
            continue
        if inner:
            exclude[name] = inner
    return exclude


def dumped(model: BaseModel, exclude: Any = None) -> dict[str, Any]:
    """`model` as JSON-ready data, without what `exclude` (a `later_defaults` result, or None) leaves out."""
    return model.model_dump(mode="json", exclude=exclude or None)


def renamed(data: dict[str, Any], names: dict[str, str]) -> dict[str, Any]:
    """`data` with keys renamed (new name → old name) in place, keeping their order."""
    return {names.get(key, key): value for key, value in data.items()}


def legacy_archival(data: dict[str, Any], session_gap_hours: float) -> dict[str, Any]:
    """ArchivalConfig's dump as agents were first stored with it: `candidates` as `prefetch`, the session gap
    inside, the old order (fields added since follow, in their own order)."""
    data = renamed(data, {"candidates": "prefetch"}) | {"recall_session_gap_hours": session_gap_hours}
    ordered = {key: data[key] for key in LEGACY_ARCHIVAL_ORDER if key in data}
    return ordered | {key: value for key, value in data.items() if key not in ordered}
