"""One forget, over every tier of one agent (the package's doc says which, and in what order).

    report = await forget_everywhere(agent, "home address", settings.home)

The tool's path (`deferred=True`) removes the archival memories and core lines at once (the lines as an edit of the
step's working copy, committed with the step) and leaves the summaries, messages and traces to `finish_deferred`,
which the agent runs when the turn ends: the turn's own messages and trace lines are then written and can be
rewritten too, and the window is read again between turns, never inside a step.
"""

from __future__ import annotations

import asyncio
import functools
import json
from datetime import datetime
from pathlib import Path
from typing import Any, Protocol

import structlog
from sqlalchemy.engine import Connection

from pagemind.blocks import Block, CoreMemory, dump_json
from pagemind.runtime.forgetting.report import ForgetReport
from pagemind.runtime.forgetting.tiers import (
    blank_memories,
    documents,
    drop_cached,
    reset_recall_index,
    rewrite_summaries,
    scrub_copies,
    tombstone_messages,
    without_matches,
)
from pagemind.runtime.forgetting.traces import scrub_traces
from pagemind.runtime.memory.archival.memory import ArchivalService
from pagemind.runtime.memory.recall.memory import RecallService
from pagemind.runtime.memory.topics import FORGET_SIMILARITY, TopicMatcher
from pagemind.runtime.spec.agent import AgentSpec
from pagemind.runtime.state.records import AgentRecord
from pagemind.runtime.state.secure_delete import securely
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.window import Window
from pagemind.tools import ArchivalMemory, RecallMemory

log = structlog.get_logger("pagemind.forget")
MAX_QUERY_CHARS = 500


class ForgettingAgent(Protocol):
    """What a forget needs of the agent (`runtime.agent.Agent` provides it)."""

    spec: AgentSpec
    record: AgentRecord
    store: StateStore
    memory: CoreMemory
    window: Window
    archival: ArchivalMemory | None
    recall: RecallMemory | None

    @property
    def name(self) -> str: ...
    def now(self) -> datetime: ...


def matcher_for(agent: ForgettingAgent, query: str, min_similarity: float = FORGET_SIMILARITY) -> TopicMatcher:
    """The forget's matcher over the agent's embedder; ValueError for an empty or oversize query."""
    query = " ".join(query.split())
    if not query:
        raise ValueError("say what to forget")
    if len(query) > MAX_QUERY_CHARS:
        raise ValueError(f"a forget's query has at most {MAX_QUERY_CHARS} characters")
    embedder = agent.archival.embedder if isinstance(agent.archival, ArchivalService) else None
    if embedder is None and isinstance(agent.recall, RecallService):
        embedder = agent.recall.embedder
    return TopicMatcher(query, embedder, min_similarity=min_similarity, every_word=True)


async def forget_everywhere(
    agent: ForgettingAgent,
    query: str,
    home: Path | None,
    *,
    core: CoreMemory | None = None,
    deferred: bool = False,
    min_similarity: float = FORGET_SIMILARITY,
) -> ForgetReport:
    """Remove what `query` matches from every tier (`deferred`: the tool's path, see the module doc). `core`: the
    working copy to edit (a step's); without it the agent's blocks are edited and stored here."""
    matcher = matcher_for(agent, query, min_similarity)
    report, needles = ForgetReport(deferred_messages=deferred), set[str]()
    await _archival(agent, matcher, report, needles)
    _blocks(agent, matcher, core, report, needles)
    if not deferred:
        await _rest(agent, matcher, home, report, needles)
    log.info("forgotten", agent=agent.name, removed=report.total, deferred=deferred)
    return report


async def finish_deferred(agent: ForgettingAgent, query: str, home: Path | None, min_similarity: float) -> ForgetReport:
    """The rest of a tool's forget, when its turn has ended: summaries, messages, copies, traces."""
    matcher = matcher_for(agent, query, min_similarity)
    report, needles = ForgetReport(), set[str]()
    _blocks(agent, matcher, None, report, needles)  # a line written again later in the turn
    await _rest(agent, matcher, home, report, needles)
    return report


async def _archival(agent: ForgettingAgent, matcher: TopicMatcher, report: ForgetReport, needles: set[str]) -> None:
    archival = agent.archival
    if not isinstance(archival, ArchivalService):
        return
    records = await asyncio.to_thread(archival.list, True)
    hit = await asyncio.to_thread(matcher.select, records, lambda r: r.text)
    for record in hit:
        kept, removed = (
            await asyncio.to_thread(without_matches, record.text, matcher) if record.kind == "episode" else ("", [])
        )
        if kept and removed:
            await archival.rewrite(record.id, kept, operation="forget", detail={})
            needles.update(removed)
            report.episodes += 1
        else:
            # its text zeroed in place first (`tiers.blank_memories`), then the memory forgotten
            blank = functools.partial(blank_memories, agent_id=agent.record.id, ids=[record.id])
            await asyncio.to_thread(securely, agent.store.engine, blank)
            await archival.forget(record.id)
            needles.add(record.text)
            report.archival += 1
    if hit:
        await asyncio.to_thread(archival.store.backend.compact)  # no deleted point's bytes left in the shard
        cached = [record.text for record in hit]
        await asyncio.to_thread(securely, agent.store.engine, lambda conn: drop_cached(conn, cached))


def _blocks(
    agent: ForgettingAgent, matcher: TopicMatcher, core: CoreMemory | None, report: ForgetReport, needles: set[str]
) -> None:
    target = core if core is not None else agent.memory.copy()
    now = agent.now()
    for block in list(target.blocks):
        if block.read_only or not block.value.strip():
            continue
        value, removed = _block_without(block, matcher)
        if removed:
            target.forget(block.label, value, now)
            needles.update(removed)
            report.block_lines[block.label] = report.block_lines.get(block.label, 0) + len(removed)
    if core is None and target.pending:
        agent.store.commit_edits(agent.record.id, target.clear_pending(), agent.window.block_versions)
        agent.memory = target


def _block_without(block: Block, matcher: TopicMatcher) -> tuple[str, list[str]]:
    """The block's value without its lines (a structured block: its fields) that match, and what was removed."""
    if block.schema is not None:
        try:
            data = json.loads(block.value)
        except json.JSONDecodeError:
            data = None
        if isinstance(data, dict):
            texts = [f"{key}: {_plain(value)}" for key, value in data.items()]
            hits = matcher.matches(texts)
            removed = [_plain(v) for (k, v), hit in zip(data.items(), hits, strict=True) if hit]
            kept = {k: v for (k, v), hit in zip(data.items(), hits, strict=True) if not hit}
            return (dump_json(kept) if removed else block.value), removed
    lines = block.value.splitlines()
    hits = matcher.matches(lines)
    removed = [line for line, hit in zip(lines, hits, strict=True) if hit and line.strip()]
    return "\n".join(line for line, hit in zip(lines, hits, strict=True) if not hit), removed


def _plain(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


async def _rest(
    agent: ForgettingAgent, matcher: TopicMatcher, home: Path | None, report: ForgetReport, needles: set[str]
) -> None:
    """Summaries, messages, every stored copy, the recall index and cache, then the traces; the window read again."""
    agent_id, at = agent.record.id, agent.now()

    def work(conn: Connection) -> None:
        before = documents(conn, agent_id)
        report.summaries = rewrite_summaries(conn, agent_id, matcher, needles)
        report.messages = tombstone_messages(conn, agent_id, matcher, needles, at)
        scrub_copies(conn, agent_id, matcher, needles)
        if report.messages:
            reset_recall_index(conn, agent_id)
            drop_cached(conn, before - documents(conn, agent_id))

    await asyncio.to_thread(securely, agent.store.engine, work)
    if isinstance(agent.recall, RecallService):
        agent.recall.reset_index()
    agent.window.reload()
    blocks, agent.window.block_versions = agent.store.load_core(agent_id, agent.spec)
    agent.memory = CoreMemory(blocks)
    if home is not None:
        folder = Path(home) / "traces" / agent.name
        report.trace_files = await asyncio.to_thread(scrub_traces, folder, matcher, needles)
