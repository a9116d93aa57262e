"""The model's part of a flush: the new summary and the extraction of a known set of the oldest messages.

A flush used to ask the model twice in a row while the user waited. The work is now a value built from a
snapshot (which messages leave, the summary they fold into, the date the extractor is told) and run one of
three ways, all giving the same requests and the same events:

- **ahead**: a background task started once the warning line is crossed, both calls at once; at the flush line
  the answers are usually there and the eviction commits without waiting for a model;
- **on the path, concurrently**: when nothing was prepared, the flush waits for the slower call, not the sum;
- **on the path, in order** (replays): the calls go through the agent's model-call path one after the other, so a
  replay serves the recorded answers in the order the trace holds them.

Nothing here writes state: the archival inserts and the eviction happen at the flush, in that order, exactly as
before, so a kill at any point loses nothing (a kill before the eviction commits leaves the messages in the
window and the work is done again). The background calls' events are reported at the flush, in the in-order
sequence (summary calls, then extraction), so a trace does not depend on when the model answered.
"""

from __future__ import annotations

import asyncio
import contextvars
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

import structlog

from pagemind.runtime.events import Salience
from pagemind.runtime.messages import Message
from pagemind.runtime.model.client import ModelClient, ModelError, ModelRequest, ModelResponse
from pagemind.runtime.pressure.extraction import Extraction, ExtractionReport, Muted, extract
from pagemind.runtime.pressure.summarizer import SummaryResult, summarize

log = structlog.get_logger("pagemind.pressure")

Call = Callable[[ModelRequest], Awaitable[ModelResponse]]


@dataclass
class ModelCall:
    """One call made off the observer's path, kept to be reported at the flush (`response` None: it failed)."""

    request: ModelRequest
    response: ModelResponse | None = None


@dataclass(frozen=True)
class WorkSettings:
    """What the summarizer and the extractor are configured with (from the spec, at the snapshot)."""

    model: str
    summary_budget: int
    window: int
    encoding: str
    extract: bool  # extraction is on and the agent has archival memory
    muted: Muted | None = None  # which texts touch a topic the user muted: the extractor does not see them


@dataclass(frozen=True)
class FlushOutcome:
    """The new summary, and the extractor's proposal (or the report of why there is none) — nothing stored yet."""

    summary: SummaryResult
    extraction: Extraction | ExtractionReport


@dataclass
class FlushWork:
    """The summary and extraction of `messages[:count]` of a window whose summary was `old_summary`.

    `ids` identify the messages: the work fits a window only while its oldest `count` messages are these and its
    summary is still `old_summary` (`fits`)."""

    evicted: tuple[Message, ...]
    old_summary: str
    freed_tokens: int  # as the compiler counts them, before the correction factor
    enough: bool
    now: datetime
    settings: WorkSettings
    ahead: bool = False  # prepared once the warning line was crossed, not at the flush
    salience: Salience | None = None  # the salience gate on the evicted turns (None: no gate)
    calls: list[ModelCall] = field(default_factory=list)
    task: asyncio.Task[FlushOutcome] | None = None
    started: float = field(default_factory=time.perf_counter)

    @property
    def count(self) -> int:
        """How many of the oldest messages leave."""
        return len(self.evicted)

    @property
    def ids(self) -> tuple[int | None, ...]:
        """The stored ids of the messages that leave."""
        return tuple(m.id for m in self.evicted)

    def fits(self, messages: Sequence[Message], summary: str) -> bool:
        """Whether this work still describes the oldest messages of a window showing `messages` and `summary`."""
        return (
            summary == self.old_summary
            and len(messages) > self.count
            and tuple(m.id for m in messages[: self.count]) == self.ids
        )

    def start(self, model: ModelClient) -> None:
        """Run ahead, in the background: both calls at once, outside any turn (no turn's deadline applies; each
        attempt keeps the client's own timeout)."""
        self.task = asyncio.create_task(self.run_concurrently(model), context=contextvars.Context())
        self.task.add_done_callback(self._done)

    def deliverable(self) -> bool:
        """Whether the background run has its answers, or is still getting them in this event loop (a loop that
        ended, as `asyncio.run` does after each CLI command, cancelled its unfinished tasks)."""
        task = self.task
        if task is None or task.cancelled():
            return False
        if task.done():
            return task.exception() is None
        return task.get_loop() is asyncio.get_running_loop()

    def cancel(self) -> None:
        """Stop a background run whose result will not be used."""
        if self.task is not None and not self.task.done():
            self.task.cancel()

    async def run_concurrently(self, model: ModelClient) -> FlushOutcome:
        """Both calls at once, straight to `model`; the calls are kept in `calls` (summary first) for reporting."""
        summary_calls: list[ModelCall] = []
        extraction_calls: list[ModelCall] = []
        summary, extraction = await asyncio.gather(
            self.summary(_kept(model, summary_calls)), self.extraction(_kept(model, extraction_calls))
        )
        self.calls = summary_calls + extraction_calls
        return FlushOutcome(summary, extraction)

    async def run_in_order(self, call: Call) -> FlushOutcome:
        """The summary, then the extraction, each call through `call` (the agent's path: events as they happen)."""
        summary = await self.summary(call)
        return FlushOutcome(summary, await self.extraction(call))

    async def summary(self, call: Call) -> SummaryResult:
        """The new summary; if the model fails, the old one with a note pointing at recall memory (the window
        must still shrink)."""
        settings, evicted = self.settings, self.evicted
        try:
            return await summarize(
                call,
                model=settings.model,
                old_summary=self.old_summary,
                evicted=evicted,
                budget=settings.summary_budget,
                window=settings.window,
                encoding=settings.encoding,
            )
        except (ModelError, ValueError) as exc:
            log.error("summary_failed", error=str(exc)[:300])
            first, last = evicted[0].created_at, evicted[-1].created_at
            note = (
                f"[{len(evicted)} messages from {first:%Y-%m-%d %H:%M} to {last:%Y-%m-%d %H:%M} left the window "
                "without a summary; search them with conversation_search.]"
            )
            return SummaryResult(f"{self.old_summary}\n{note}".strip(), chunks=0, truncated=False)

    async def extraction(self, call: Call) -> Extraction | ExtractionReport:
        """What the extractor proposes for the evicted messages (skipped when extraction is off, and when the
        salience gate finds no turn among them worth remembering: no model call then)."""
        if not self.settings.extract:
            return ExtractionReport("skipped")
        if self.salience is not None and not self.salience.remember:
            return ExtractionReport("unsalient")
        try:
            return await extract(
                call, model=self.settings.model, messages=self.evicted, now=self.now, muted=self.settings.muted
            )
        except ModelError as exc:
            log.error("extraction_failed", error=str(exc)[:300])
            return ExtractionReport("failed", error=str(exc)[:300])

    def _done(self, task: asyncio.Task[FlushOutcome]) -> None:
        if task.cancelled():
            return
        if (error := task.exception()) is not None:
            log.error("flush_ahead_failed", error=repr(error)[:300])
            return
        log.info(
            "flush_ahead_ready",
            evicting=self.count,
            calls=len(self.calls),
            ms=round((time.perf_counter() - self.started) * 1000, 1),
        )


def _kept(model: ModelClient, calls: list[ModelCall]) -> Call:
    """A call straight to `model` that keeps each request and its response in `calls`."""

    async def call(request: ModelRequest) -> ModelResponse:
        kept = ModelCall(request)
        calls.append(kept)
        kept.response = await model.complete(request)
        return kept.response

    return call
