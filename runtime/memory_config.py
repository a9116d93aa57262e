"""The `memory:` section of an agent's YAML: pressure lines, section budgets, summarizer, archival knobs."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, model_validator


class PressureConfig(BaseModel):
    """Fractions of the usable window (`context_window − output reserve`)."""

    model_config = ConfigDict(extra="forbid")

    warn: float = Field(0.70, gt=0, lt=1)
    flush: float = Field(0.90, gt=0, le=1)
    target: float = Field(0.50, gt=0, lt=1)

    @model_validator(mode="after")
    def _ordered(self) -> "PressureConfig":
        if not self.target < self.flush:
            raise ValueError(f"target ({self.target}) must be below flush ({self.flush})")
        if not self.warn < self.flush:
            raise ValueError(f"warn ({self.warn}) must be below flush ({self.flush})")
        return self


class BudgetConfig(BaseModel):
    """Token budgets per prompt section; messages get the rest of the window."""

    model_config = ConfigDict(extra="forbid")

    system: int = Field(1000, gt=0)
    core: int = Field(1500, gt=0)
    summary: int = Field(2000, gt=0)
    retrieved: int = Field(2000, gt=0)
    output_reserve: int | None = Field(None, gt=0, description="default: model.max_output_tokens")


class ArchivalConfig(BaseModel):
    """Archival/recall memory knobs (ranking, dedupe). Defaults are justified in bench/RESULTS.md."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True


class MemoryConfig(BaseModel):
    """How the agent's memory tiers behave."""

    model_config = ConfigDict(extra="forbid")

    pressure: PressureConfig = Field(default_factory=PressureConfig)
    budgets: BudgetConfig = Field(default_factory=BudgetConfig)
    summarizer_model: str | None = Field(None, description="default: the agent's model")
    extraction: bool = True
    archival: ArchivalConfig = Field(default_factory=ArchivalConfig)
