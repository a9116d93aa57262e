"""Schemas for structured profile blocks, referenced from agent YAML as `pagemind.blocks.profiles:Model`.

Collections are maps keyed by a name rather than lists, so that a JSON merge patch (core_memory_update) can add,
change or remove one entry without restating the others.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

Date = Annotated[str, StringConstraints(pattern=r"^(\d{4}-)?\d{2}-\d{2}$")]


class Person(BaseModel):
    """Someone who matters to the user."""

    model_config = ConfigDict(extra="forbid")

    relation: str = Field(description="who they are to the user, e.g. sister, boss, best friend")
    notes: str | None = Field(None, description="what to remember about them")


class CompanionProfile(BaseModel):
    """What a long-term companion knows about the user, in fixed fields."""

    model_config = ConfigDict(extra="forbid")

    name: str | None = Field(None, description="what to call the user")
    preferences: dict[str, str] = Field(
        default_factory=dict, description="topic → like or dislike, e.g. drinks: green tea"
    )
    people: dict[str, Person] = Field(default_factory=dict, description="people who matter, keyed by name")
    dates: dict[str, Date] = Field(default_factory=dict, description="event → date, YYYY-MM-DD (MM-DD if yearly)")
    health: dict[str, str] = Field(
        default_factory=dict, description="allergies, conditions, medication, limits → detail"
    )
    situations: dict[str, str] = Field(
        default_factory=dict, description="ongoing situations (job search, a move) → where it stands"
    )
