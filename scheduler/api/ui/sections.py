"""The agent page's sections, in order: the one list a new section joins
(`add_section(Section("notes", "Notes", "sections/notes.html", build_notes), before="archival")`).

A section is an id (its anchor), a title, a template under `templates/` that gets the builder's result as `data`
(and the page's `agent`, `csrf`, `query`), and an async builder called with the agent held off its turns.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from pagemind.runtime.agent import Agent
from pagemind.scheduler.api.ui.privacy import build_forget, build_review
from pagemind.scheduler.api.ui.views import (
    PageQuery,
    build_archival,
    build_blocks,
    build_summary,
    build_turns,
    build_window,
)

Builder = Callable[[Agent, PageQuery], Awaitable[Any]]


@dataclass(frozen=True)
class Section:
    """One part of the agent page."""

    id: str
    title: str
    template: str
    build: Builder


SECTIONS: list[Section] = [
    Section("blocks", "Core memory", "sections/blocks.html", build_blocks),
    Section("window", "Context window", "sections/window.html", build_window),
    Section("summary", "Summary", "sections/summary.html", build_summary),
    Section("turns", "Recent turns", "sections/turns.html", build_turns),
    Section("review", "Review queue", "sections/review.html", build_review),
    Section("archival", "Archival memory", "sections/archival.html", build_archival),
    Section("forget", "Forget and mute", "sections/forget.html", build_forget),
]


def add_section(section: Section, before: str | None = None) -> None:
    """Add a section to every agent page: before the section of id `before`, else last. An id is unique."""
    if any(s.id == section.id for s in SECTIONS):
        raise ValueError(f"the agent page has a section '{section.id}' already")
    index = next((i for i, s in enumerate(SECTIONS) if s.id == before), len(SECTIONS))
    SECTIONS.insert(index, section)


async def built(agent: Agent, query: PageQuery) -> list[tuple[Section, Any]]:
    """Every section with its data, in page order."""
    return [(section, await section.build(agent, query)) for section in SECTIONS]
