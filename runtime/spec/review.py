"""`memory.review`: which writes of memory wait for a person's approval.

    memory:
      review: required                 # extraction and reflection wait for review
      review: {extraction: required, archival_memory_insert: required}   # per kind

A held memory waits as `pending` (`runtime.memory.review`): not searchable, not prefetched, listed by
`pagemind memory review AGENT` and `GET /v1/agents/{name}/memory/review` until approved (optionally pinned, or
edited first) or rejected.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

Review = Literal["off", "required"]
ReviewKind = Literal["extraction", "reflection", "archival_memory_insert"]
ReviewSetting = Review | dict[ReviewKind, Review]  # what the YAML holds: one knob (issue #37's count of them)
ORIGINS = ("extraction", "reflection", "archival_memory_insert")


class ReviewConfig(BaseModel):
    """Per kind of write: `off` stores at once, `required` holds it as pending until a person decides."""

    model_config = ConfigDict(extra="forbid")

    extraction: Review = Field("off", description="memories the extractor finds in messages leaving the window")
    reflection: Review = Field("off", description="insights and done items written by sleep-time reflection")
    archival_memory_insert: Review = Field("off", description="memories the model saves itself with the tool")

    @model_validator(mode="before")
    @classmethod
    def _one_word(cls, data: Any) -> Any:
        """`review: required` (or `off`) sets extraction and reflection alike."""
        if isinstance(data, str):
            return {"extraction": data, "reflection": data}
        return data

    def holds(self, origin: str) -> bool:
        """Whether writes of this origin wait for review."""
        return bool(getattr(self, origin, "off") == "required")

    @classmethod
    def of(cls, setting: ReviewSetting) -> ReviewConfig:
        """The policy a `memory.review` setting gives: one word for extraction and reflection, or per kind."""
        return cls.model_validate(setting)

    @property
    def any(self) -> bool:
        """Whether any kind waits for review."""
        return any(self.holds(origin) for origin in ORIGINS)
