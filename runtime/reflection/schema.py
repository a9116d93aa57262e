"""What a reflection's model call must answer: the pydantic model (the contract with the benchmark's model), the
provider's JSON-schema response format built from it, and the parser that finds the JSON in whatever came back."""

from __future__ import annotations

import json
import re
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError


class Merge(BaseModel):
    """Memories that say the same thing: `keep` survives, each of `drop` is superseded by it."""

    keep: str
    drop: list[str]
    reason: str


class Resolution(BaseModel):
    """Memories that contradict each other: `winner` stays, each of `losers` is superseded by it (never deleted)."""

    winner: str
    losers: list[str]
    reason: str


class Insight(BaseModel):
    """Something no single message states, worth remembering as a `reflection` memory."""

    text: str = Field(min_length=1)
    importance: float = Field(0.6, ge=0, le=1)
    source_ids: list[str] = Field(default_factory=list)


class Done(BaseModel):
    """A todo or progress memory that is finished."""

    id: str
    reason: str


class ReflectionOutput(BaseModel):
    """The whole answer of a reflection; every list may be empty."""

    model_config = ConfigDict(extra="ignore")

    merges: list[Merge] = Field(default_factory=list)
    contradictions: list[Resolution] = Field(default_factory=list)
    insights: list[Insight] = Field(default_factory=list)
    profile: dict[str, Any] | None = Field(None, description="RFC 7386 JSON merge patch for the profile block")
    done: list[Done] = Field(default_factory=list)


def response_format() -> dict[str, Any]:
    """The chat-completions `response_format` asking for this schema. Not `strict`: OpenAI's strict mode wants
    every field required and no open objects, and the profile patch is an open object."""
    return {
        "type": "json_schema",
        "json_schema": {"name": "reflection", "schema": ReflectionOutput.model_json_schema(), "strict": False},
    }


_FENCED = re.compile(r"```(?:json)?\s*(.*?)\s*```", re.S | re.I)


class OutputError(ValueError):
    """The model's answer is not a valid reflection (nothing is applied)."""


def parse_output(text: str | None) -> ReflectionOutput:
    """The reflection in the model's answer: the whole text as JSON, else a ```json fenced block, else the span
    from the first `{` to the last `}` (models that ignore the response format wrap it in prose). Raises
    OutputError saying what is wrong."""
    raw = (text or "").strip()
    if not raw:
        raise OutputError("the answer is empty")
    fenced = _FENCED.search(raw)
    candidates = [raw] + ([fenced.group(1)] if fenced else []) + [raw[raw.find("{") : raw.rfind("}") + 1]]
    error = "no JSON object in the answer"
    for candidate in candidates:
        try:
            value = json.loads(candidate)
        except json.JSONDecodeError:
            continue
        if not isinstance(value, dict):
            error = f"the answer is JSON but not an object ({type(value).__name__})"
            continue
        try:
            return ReflectionOutput.model_validate(value)
        except ValidationError as exc:
            raise OutputError(f"the answer does not match the reflection schema: {exc}") from exc
    raise OutputError(error)
