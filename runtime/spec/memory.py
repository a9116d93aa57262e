"""The `memory:` section of an agent's YAML, in two tiers: the product knobs, and `advanced:` for the tuning.

    memory:
      retrieval: multilingual       # a tuning preset (`spec.presets`); unset: the embedding model's own
      memories_per_turn: 3          # memories looked up into the prompt for each user message (0: none)
      summarizer_model: gpt-4o-mini # summaries, episodes, reflections (default: the agent's model)
      advanced:                     # everything else; what the preset does not say keeps its default
        pressure: {flush: 0.85}
        session_gap_hours: 6
        archival: {dense_weight: 0.4}
        salience: {model: tiny}

The runtime reads the resolved sections where it always did (`spec.memory.archival`, `.salience`, `.pressure`,
`.budgets`, `.extraction`, `.episodes`, `.reflection`, `.session_gap_hours`): the preset applied to
`advanced`, one place for every tuning value. Files written before the tiers (`memory.archival: …`,
`prefetch_top_k`) still load, with a warning (`spec.renames`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from pagemind.runtime.spec.fingerprint import dumped, later_default, later_defaults, legacy_archival, renamed
from pagemind.runtime.spec.presets import PRESETS, Retrieval, apply_preset
from pagemind.runtime.spec.renames import SALIENCE_RENAMES, migrate_memory
from pagemind.runtime.spec.review import ReviewConfig, ReviewSetting
from pagemind.runtime.spec.tuning import (
    ArchivalConfig,
    BudgetConfig,
    EpisodesConfig,
    EpisodeTier,
    ExpiryConfig,
    MultiHopConfig,
    PressureConfig,
    ReflectionConfig,
    SalienceConfig,
    SalienceWeights,
    TemporalConfig,
)

# The sections of `advanced` the runtime reads resolved, through `MemoryConfig`'s properties of the same names.
ADVANCED = ("pressure", "budgets", "extraction", "session_gap_hours", "archival", "salience", "episodes", "reflection")


class MemoryAdvanced(BaseModel):
    """Tuning for specialists. A value given here wins over the preset's (`memory.retrieval`); one equal to its
    built-in default counts as not given."""

    model_config = ConfigDict(extra="forbid")

    pressure: PressureConfig = Field(default_factory=PressureConfig, description="when the window is flushed")
    budgets: BudgetConfig = Field(default_factory=BudgetConfig, description="token budgets per prompt section")
    extraction: bool = Field(
        True, description="extract archival memories from messages leaving the window (a model call per flush)"
    )
    session_gap_hours: float = Field(
        6.0,
        gt=0,
        description="hours of silence that end a session: where episodes split, and how far back "
        "conversation_search's context reaches",
    )
    archival: ArchivalConfig = Field(
        default_factory=ArchivalConfig, description="archival and recall ranking, noise floors, dedupe"
    )
    salience: SalienceConfig = Field(
        default_factory=SalienceConfig, description="which turns are worth remembering and a lookup"
    )
    episodes: EpisodesConfig = Field(
        default_factory=EpisodesConfig, description="sessions summarised into episode memories"
    )
    reflection: ReflectionConfig = Field(default_factory=ReflectionConfig, description="sleep-time reflection")


class MemoryConfig(BaseModel):
    """How the agent's memory tiers behave."""

    model_config = ConfigDict(extra="forbid")

    retrieval: Retrieval | None = Field(
        None,
        description="tuning preset: default (English, all-MiniLM-L6-v2) or multilingual (multilingual-e5-small); "
        "unset: the preset of the embedding model in use (PAGEMIND_EMBEDDING_MODEL)",
    )
    memories_per_turn: int = Field(
        3, ge=0, le=20, description="archival memories looked up into the prompt for each user message (0: none)"
    )
    summarizer_model: str | None = Field(
        None, description="model that writes summaries, episodes and reflections (default: the agent's model)"
    )
    review: ReviewSetting = Field(
        "off",
        description="which writes wait as pending for a person's approval: off, required (extraction and "
        "reflection), or per kind: {extraction, reflection, archival_memory_insert: off | required}",
    )
    advanced: MemoryAdvanced = Field(default_factory=MemoryAdvanced, description="tuning; the preset's values apply")

    _archival: ArchivalConfig = PrivateAttr(default_factory=ArchivalConfig)
    _salience: SalienceConfig = PrivateAttr(default_factory=SalienceConfig)

    @model_validator(mode="before")
    @classmethod
    def _old_names(cls, data: Any) -> Any:
        return migrate_memory(data)

    @model_validator(mode="after")
    def _resolved(self) -> MemoryConfig:
        self.resolve()
        return self

    def resolve(self) -> None:
        """Work out the resolved sections again (the preset applied to `advanced`)."""
        preset = PRESETS[self.retrieval or "default"]
        self._archival = apply_preset(self.advanced.archival, preset.archival)
        self._salience = apply_preset(self.advanced.salience, preset.salience)

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy with `update` applied and the sections resolved again; a section named as the runtime reads it
        (`update={"salience": …}`) replaces that section of `advanced`."""
        update = dict(update or {})
        if "prefetch_top_k" in update:
            update["memories_per_turn"] = update.pop("prefetch_top_k")
        sections = {name: update.pop(name) for name in ADVANCED if name in update}
        if sections:
            update["advanced"] = update.get("advanced", self.advanced).model_copy(update=sections)
        copied = super().model_copy(update=update, deep=deep)
        copied.resolve()
        return copied

    # -- the resolved sections: what the runtime reads ---------------------------------------------------------

    @property
    def archival(self) -> ArchivalConfig:
        """Archival and recall ranking: `advanced.archival` with the preset applied (the embedding model's own
        preset, when `retrieval` is unset, applies at wiring: `archival_for`)."""
        return self._archival

    @property
    def salience(self) -> SalienceConfig:
        """The salience gate: `advanced.salience` with the preset applied."""
        return self._salience

    @property
    def review_policy(self) -> ReviewConfig:
        """Which writes wait for review (`memory.review`, resolved per kind)."""
        return ReviewConfig.of(self.review)

    @property
    def pressure(self) -> PressureConfig:
        """The pressure lines (`advanced.pressure`)."""
        return self.advanced.pressure

    @property
    def budgets(self) -> BudgetConfig:
        """The prompt's section budgets (`advanced.budgets`)."""
        return self.advanced.budgets

    @property
    def extraction(self) -> bool:
        """Whether messages leaving the window are mined for memories (`advanced.extraction`)."""
        return self.advanced.extraction

    @property
    def session_gap_hours(self) -> float:
        """Hours of silence that end a session (`advanced.session_gap_hours`)."""
        return self.advanced.session_gap_hours

    @property
    def episodes(self) -> EpisodesConfig:
        """Episodes (`advanced.episodes`)."""
        return self.advanced.episodes

    @property
    def reflection(self) -> ReflectionConfig:
        """Reflection (`advanced.reflection`)."""
        return self.advanced.reflection

    def archival_for(self, model_values: Mapping[str, Any]) -> ArchivalConfig:
        """The archival configuration on an embedding model that brings its own preset's values (`profiles`):
        they apply when `retrieval` is unset, to the fields `advanced.archival` leaves at their defaults."""
        return self.archival if self.retrieval is not None else apply_preset(self.archival, model_values)

    # -- the fingerprint (`spec.fingerprint`) ------------------------------------------------------------------

    def fingerprint_exclude(self) -> dict[str, Any]:
        """`later_defaults` for the fingerprint's shape (the section as it was before the tiers)."""
        exclude: dict[str, Any] = {}
        for name in ("pressure", "budgets", "archival", "episodes", "salience", "reflection"):
            section = getattr(self, name)
            if name in ("episodes", "salience", "reflection") and section == later_default(type(self.advanced), name):
                exclude[name] = True
            elif inner := later_defaults(section):
                exclude[name] = inner
        if self.retrieval is None:
            exclude["retrieval"] = True
        return exclude

    def fingerprint(self) -> dict[str, Any]:
        """The resolved section, spelled as agents were first stored with it (`spec.fingerprint`)."""
        exclude = self.fingerprint_exclude()
        data: dict[str, Any] = {
            "pressure": dumped(self.pressure, exclude.get("pressure")),
            "budgets": BudgetConfig.LEGACY | dumped(self.budgets, exclude.get("budgets")),
            "summarizer_model": self.summarizer_model,
            "extraction": self.extraction,
            "prefetch_top_k": self.memories_per_turn,
            "archival": legacy_archival(dumped(self.archival, exclude.get("archival")), self.session_gap_hours),
        }
        for name in ("episodes", "salience", "reflection"):
            if exclude.get(name) is not True:
                data[name] = dumped(getattr(self, name), exclude.get(name))
        if "salience" in data:
            data["salience"] = renamed(data["salience"], {new: old for old, new in SALIENCE_RENAMES.items()})
        if self.retrieval is not None:
            data["retrieval"] = self.retrieval
        if self.review_policy.any:  # (agents stored before it keep their fingerprint)
            data["review"] = self.review_policy.model_dump()
        return data


__all__ = [
    "ADVANCED",
    "ArchivalConfig",
    "BudgetConfig",
    "EpisodeTier",
    "EpisodesConfig",
    "ExpiryConfig",
    "MemoryAdvanced",
    "MemoryConfig",
    "MultiHopConfig",
    "PressureConfig",
    "ReflectionConfig",
    "ReviewConfig",
    "SalienceConfig",
    "SalienceWeights",
    "TemporalConfig",
]
