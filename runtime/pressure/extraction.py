"""Reflection on eviction: mine the messages leaving the window for lasting memories.

One model call returns JSON `{facts, preferences, progress, todos}`; each item goes into archival memory
through the same write path as `archival_memory_insert` (dedupe, supersede). An empty or unparseable answer is
logged as such and never reported as success.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import structlog
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from pagemind.runtime.messages import Message
from pagemind.runtime.model.client import ModelRequest, ModelResponse
from pagemind.runtime.model.response import without_fence
from pagemind.runtime.pressure.summarizer import transcript_line
from pagemind.tools import ArchivalMemory

log = structlog.get_logger("pagemind.extraction")

EXTRACTION_INSTRUCTIONS = """\
Extract lasting memories from these conversation messages, which are leaving an AI agent's context window. \
Today is {today}.
Return only a JSON object with four lists: "facts", "preferences", "progress", "todos". Each item is \
{{"text": "...", "importance": 0.0-1.0, "date": "YYYY-MM-DD" or null}}.
- facts: durable facts about the user, people, places, events ("Lin is allergic to peanuts").
- preferences: likes, dislikes, how the user wants things done.
- progress: what was done or decided in a task.
- todos: open tasks and promises, with their due date if one was given.
Write each item as a self-contained sentence with names, not pronouns. Convert relative dates ("tomorrow", \
"last week") to absolute dates using the message timestamps. Skip small talk. Empty lists are fine."""

Muted = Callable[[Sequence[str]], list[bool]]  # which texts touch a muted topic (`memory.topics.MutedTopics.muted`)

KIND_BY_SECTION = {"facts": "fact", "preferences": "preference", "progress": "progress", "todos": "todo"}


class ExtractedItem(BaseModel):
    """One memory the extractor proposes."""

    model_config = ConfigDict(extra="ignore")

    text: str = Field(min_length=1)
    importance: float = Field(0.5, ge=0, le=1)
    date: dt.date | None = None


class Extraction(BaseModel):
    """The extractor's whole answer."""

    model_config = ConfigDict(extra="ignore")

    facts: list[ExtractedItem] = Field(default_factory=list)
    preferences: list[ExtractedItem] = Field(default_factory=list)
    progress: list[ExtractedItem] = Field(default_factory=list)
    todos: list[ExtractedItem] = Field(default_factory=list)

    def items(self) -> list[tuple[str, ExtractedItem]]:
        """(kind, item) pairs in section order."""
        return [(KIND_BY_SECTION[name], item) for name in KIND_BY_SECTION for item in getattr(self, name)]


@dataclass(frozen=True)
class ExtractionReport:
    """What extraction did: `status` is stored | empty | unparseable | invalid (every item refused) | skipped |
    unsalient (the salience gate found nothing worth remembering: no model call)."""

    status: str
    stored: int = 0
    error: str | None = None


def parse_extraction(text: str | None) -> Extraction:
    """Parse the model's answer (tolerating a Markdown code fence); raises ValueError when it is not usable."""
    raw = without_fence(text)
    try:
        return Extraction.model_validate(json.loads(raw))
    except (json.JSONDecodeError, ValidationError, TypeError) as exc:
        raise ValueError(f"extraction is not the expected JSON: {exc}") from exc


def extraction_request(model: str, messages: Sequence[Message], now: datetime) -> ModelRequest:
    """The extractor's request."""
    transcript = "\n".join(transcript_line(m) for m in messages)
    return ModelRequest(
        model=model,
        messages=[
            {"role": "system", "content": EXTRACTION_INSTRUCTIONS.format(today=now.date().isoformat())},
            {"role": "user", "content": transcript},
        ],
        tools=[],
        temperature=0.0,
        max_tokens=1024,
        purpose="extract",
    )


async def extract(
    call: Callable[[ModelRequest], Awaitable[ModelResponse]],
    *,
    model: str,
    messages: Sequence[Message],
    now: datetime,
    muted: Muted | None = None,
) -> Extraction | ExtractionReport:
    """The model's half of extraction: what it proposes, or the report of an answer that cannot be used.

    Kept apart from storing so a flush can ask the model ahead of time and store only when it evicts. `muted` says
    which transcript lines touch a muted topic (`memory.topics`): those messages are not shown to the extractor."""
    if muted is not None:
        hidden = await asyncio.to_thread(muted, [transcript_line(m) for m in messages])
        messages = [m for m, hide in zip(messages, hidden, strict=True) if not hide]
        if not messages:
            return ExtractionReport("empty")
    response = await call(extraction_request(model, messages, now))
    try:
        extraction = parse_extraction(response.content)
    except ValueError as exc:
        log.warning("extraction_unparseable", error=str(exc)[:300], answer=(response.content or "")[:300])
        return ExtractionReport("unparseable", error=str(exc)[:300])
    if not extraction.items():
        log.info("extraction_empty", messages=len(messages))
        return ExtractionReport("empty")
    return extraction


async def store_extraction(
    archival: ArchivalMemory,
    extraction: Extraction | ExtractionReport,
    messages: Sequence[Message],
    review: Any = None,
) -> ExtractionReport:
    """Store what `extract` proposed through the archival write path (dedupe, supersede); a report passes through.
    With `review` (a `memory.review.ReviewQueue`) holding extraction, each item waits for review instead."""
    if isinstance(extraction, ExtractionReport):
        return extraction
    items = extraction.items()
    mutes = getattr(archival, "mutes", None)  # the runtime's archival memory has them (`memory.topics`)
    if mutes is not None:
        items = await asyncio.to_thread(mutes.drop, items, lambda pair: pair[1].text)
    source_ids = [m.id for m in messages if m.id is not None]
    stored = 0
    for kind, item in items:
        text = f"{item.text} (date: {item.date.isoformat()})" if item.date else item.text
        try:
            if review is not None and review.holds("extraction"):
                await review.hold(
                    "extraction", text, kind=kind, importance=item.importance, source_message_ids=source_ids
                )
                stored += 1
                continue
            await archival.insert(text, kind=kind, importance=item.importance, source_message_ids=source_ids)
        except ValueError as exc:
            # One bad item (blank, oversize, an unknown kind) must not stop the flush: skip it, keep the rest.
            log.warning("extraction_item_skipped", kind=kind, error=str(exc)[:300], text=text[:200])
            continue
        stored += 1
    log.info("extraction_stored", stored=stored, skipped=len(items) - stored)
    return ExtractionReport("stored" if stored else "invalid", stored=stored)


async def extract_and_store(
    call: Callable[[ModelRequest], Awaitable[ModelResponse]],
    archival: ArchivalMemory,
    *,
    model: str,
    messages: Sequence[Message],
    now: datetime,
) -> ExtractionReport:
    """Run extraction over `messages` and store what it finds; never raises for a bad answer."""
    return await store_extraction(archival, await extract(call, model=model, messages=messages, now=now), messages)
