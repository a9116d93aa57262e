"""What the memory page shows of one loaded agent, as plain data for the templates (which escape all of it).

Each `build_*` reads an agent held off its turns (`Daemon.agent`): SQL reads run off the event loop
(`state.off_loop`), as the API's do. The window's numbers are those of `pagemind context` (`context_report`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pagemind.runtime.agent import Agent
from pagemind.runtime.cli.context_view import context_report
from pagemind.runtime.forgetting.report import ForgetReport
from pagemind.runtime.memory.archival.memory import ArchivalService
from pagemind.runtime.messages import Message
from pagemind.runtime.state.off_loop import off_loop

TURNS = 8  # the recent turns shown
HISTORY = 10  # edits shown per block, newest first
ARCHIVAL = 50  # memories listed, newest first
HITS = 10  # search results
CLIP = 2000  # characters of one message or tool argument shown


@dataclass(frozen=True)
class Refusal:
    """A form of the page refused: which (`review:ID`, `forget`, `mute`), why, and the value sent (kept in it)."""

    form: str
    why: str
    value: str


@dataclass(frozen=True)
class PageQuery:
    """What the request asks of the page beyond the agent: an archival search, the block just saved, or a failed
    edit (its label, why, and the value sent, kept in the form); what a form just did (`done`, a word of
    `privacy.DONE`), a refused form of the review queue or forget, a forget's report (counts only)."""

    q: str = ""
    saved: str = ""
    failed: tuple[str, str, str] | None = None
    done: str = ""
    refused: Refusal | None = None
    forgotten: ForgetReport | None = None


@dataclass(frozen=True)
class VersionView:
    """One edit of a core block."""

    at: str
    operation: str
    step: int | None
    old: str
    new: str


@dataclass(frozen=True)
class BlockView:
    """One core block, its size and its newest edits."""

    label: str
    value: str
    chars: int
    limit: int
    description: str
    read_only: bool
    structured: bool
    edits: int
    history: list[VersionView]
    error: str = ""  # why the last edit sent from the page was refused (its value then stands in `value`)


@dataclass(frozen=True)
class Bar:
    """One section of the window: its tokens and its share of the usable window, in percent."""

    legend: str
    slug: str
    tokens: int
    start: float
    percent: float


@dataclass(frozen=True)
class WindowView:
    """The window as `pagemind context` draws it: tokens per section against the usable window, the lines."""

    tokens: int
    usable: int
    context_window: int
    used_percent: float
    warn_percent: float
    flush_percent: float
    warn_at: int
    flush_at: int
    level: str
    bars: list[Bar]


@dataclass(frozen=True)
class MessageView:
    """One message of a turn, tool calls and results included."""

    role: str
    at: str
    text: str
    calls: list[tuple[str, str]] = field(default_factory=list)  # (tool, arguments)
    tool: str = ""  # a tool result's tool
    is_error: bool = False


@dataclass(frozen=True)
class TurnView:
    """The messages of one turn (or of none: a message stored outside a turn)."""

    turn_id: str
    messages: list[MessageView]


@dataclass(frozen=True)
class MemoryView:
    """One archival memory, listed or found."""

    id: str
    text: str
    kind: str
    tags: list[str]
    importance: float
    at: str
    score: float | None = None


@dataclass(frozen=True)
class ArchivalView:
    """The agent's archival memory: enabled or not, counts, the newest memories, and a search's results."""

    enabled: bool
    count: int = 0
    tags: tuple[str, ...] = ()
    memories: list[MemoryView] = field(default_factory=list)
    q: str = ""
    hits: list[MemoryView] | None = None


def clip(text: str | None, limit: int = CLIP) -> str:
    """Text shown whole up to `limit` characters, then cut with an ellipsis."""
    text = text or ""
    return text if len(text) <= limit else text[: limit - 1] + "…"


async def build_blocks(agent: Agent, query: PageQuery) -> list[BlockView]:
    """The core blocks in prompt order, each with its newest edits (`StateStore.block_history`)."""
    every = await off_loop(agent.store.engine, agent.store.block_history, agent.record.id, None)
    views = []
    for block in agent.memory.blocks:
        edits = [v for v in every if v.label == block.label]
        failed = query.failed if query.failed is not None and query.failed[0] == block.label else None
        views.append(
            BlockView(
                label=block.label,
                value=failed[2] if failed else block.value,
                chars=block.chars,
                limit=block.limit,
                description=block.description or "",
                read_only=block.read_only,
                structured=block.schema is not None,
                edits=len(edits),
                history=[
                    VersionView(f"{v.created_at:%Y-%m-%d %H:%M:%S}", v.operation, v.step_id, v.old_value, v.new_value)
                    for v in reversed(edits[-HISTORY:])
                ],
                error=failed[1] if failed else "",
            )
        )
    return views


async def build_window(agent: Agent, query: PageQuery) -> WindowView:
    """The compiled window's tokens per section (all core blocks together) as shares of the usable window."""
    compiled = agent.compile()
    correction = agent.window.correction
    report: dict[str, Any] = context_report(compiled, agent.spec, correction)
    usable, pressure = max(1, int(report["usable"])), agent.spec.memory.pressure
    bars, start = [], 0.0
    for legend, tokens in report["grouped"].items():
        percent = 100.0 * tokens * correction / usable
        bars.append(Bar(legend, legend.replace(" ", "-"), tokens, round(start, 2), round(percent, 2)))
        start += percent
    return WindowView(
        tokens=report["tokens"],
        usable=usable,
        context_window=report["context_window"],
        used_percent=round(100.0 * report["tokens"] / usable, 1),
        warn_percent=round(100.0 * pressure.warn, 2),  # where `pagemind context` draws its lines
        flush_percent=round(100.0 * pressure.flush, 2),
        warn_at=report["warn_at"],
        flush_at=report["flush_at"],
        level=report["level"],
        bars=bars,
    )


async def build_summary(agent: Agent, query: PageQuery) -> str:
    """The recursive summary of what was evicted from the window ("" before the first flush)."""
    return agent.window.summary


def _message_view(message: Message) -> MessageView:
    return MessageView(
        role=message.role,
        at=f"{message.created_at:%Y-%m-%d %H:%M:%S}",
        text=clip(message.content),
        calls=[(call.name, clip(call.arguments)) for call in message.tool_calls],
        tool=message.name or "",
        is_error=message.is_error,
    )


async def build_turns(agent: Agent, query: PageQuery) -> list[TurnView]:
    """The window's newest turns, oldest first, each with its messages, tool calls and tool results."""
    turns: list[TurnView] = []
    for message in agent.window.messages:
        turn_id = message.turn_id or ""
        if not turns or turns[-1].turn_id != turn_id:
            turns.append(TurnView(turn_id, []))
        turns[-1].messages.append(_message_view(message))
    return turns[-TURNS:]


def _memory_view(memory: Any, score: float | None = None) -> MemoryView:
    at = getattr(memory, "created_at", None) or getattr(memory, "date", None)
    return MemoryView(
        id=memory.id,
        text=clip(memory.text),
        kind=memory.kind,
        tags=list(memory.tags),
        importance=memory.importance,
        at=f"{at:%Y-%m-%d %H:%M}" if at is not None else "",
        score=score,
    )


async def build_archival(agent: Agent, query: PageQuery) -> ArchivalView:
    """The newest live memories and, for a query, the hits ranked as the agent's own `archival_search` ranks
    (hit counts left alone: looking is not using)."""
    archival = agent.archival
    if archival is None:
        return ArchivalView(enabled=False)
    engine = agent.store.engine
    count, tags, memories = 0, tuple[str, ...](), list[Any]()  # a test double's memory lists nothing
    if isinstance(archival, ArchivalService):  # the service lists; the tools' protocol (a test double's) only searches
        count, tags = await off_loop(engine, archival.stats)
        memories = (await off_loop(engine, archival.list))[:ARCHIVAL]
    hits = None
    if query.q:
        found = await archival.search(query.q, top_k=HITS, count_hits=False)
        hits = [_memory_view(hit, hit.score) for hit in found]
    return ArchivalView(True, count, tags, [_memory_view(m) for m in memories], query.q, hits)
