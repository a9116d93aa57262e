"""The SQL side of a forget, in the caller's transaction: summaries rewritten, messages tombstoned, every stored copy
of a removed text scrubbed (block and memory versions, the daemon's inbox and relayed events), the recall index
emptied to be rebuilt from the rewritten messages, and the embedding cache entries of the removed texts deleted."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from datetime import datetime
from typing import Any

from sqlalchemy import delete, select, text, update
from sqlalchemy.engine import Connection

from pagemind.runtime.memory.embedding.cache import text_hash
from pagemind.runtime.memory.recall.indexes import embedded_documents
from pagemind.runtime.memory.recall.rows import searchable_text
from pagemind.runtime.memory.topics import TopicMatcher
from pagemind.runtime.state.block_edits import scrub_versions
from pagemind.runtime.state.dialects import dialect
from pagemind.runtime.state.tables.agents import AgentRow
from pagemind.runtime.state.tables.archival import archival_memories, archival_memory_versions
from pagemind.runtime.state.tables.conversation import MessageRow, SummaryRow
from pagemind.runtime.state.tables.daemon import inbox, run_events
from pagemind.runtime.state.tables.memory import embedding_cache, recall_watermarks
from pagemind.runtime.state.tables.schema import table_of

SCRUBBED = "[forgotten]"
_SENTENCE = re.compile(r"(?<=[.!?。！？])\s*|\n+")
_AGENTS, _MESSAGES, _SUMMARIES = table_of(AgentRow), table_of(MessageRow), table_of(SummaryRow)


def sentences(value: str) -> list[str]:
    """A text's sentences (and lines), blanks left out."""
    return [s.strip() for s in _SENTENCE.split(value) if s and s.strip()]


def without_matches(value: str, matcher: TopicMatcher) -> tuple[str, list[str]]:
    """(the text without its sentences that match, the sentences removed)."""
    parts = sentences(value)
    hits = matcher.matches(parts) if parts else []
    removed = [p for p, hit in zip(parts, hits, strict=True) if hit]
    return " ".join(p for p, hit in zip(parts, hits, strict=True) if not hit), removed


def tombstone(at: datetime) -> str:
    """What a forgotten message says instead."""
    return f"[forgotten on {at:%Y-%m-%d}: this message was removed at the user's request]"


def blank_memories(conn: Connection, agent_id: int, ids: list[str]) -> None:
    """The text of memories about to be forgotten, and of their versions, overwritten in place first: run under
    `state.secure_delete.securely`, the old cells are zeroed, whatever the archival service's own deletes then do
    (SQLite keeps a deleted row's bytes in the page's free space unless `secure_delete` is on for that
    connection)."""
    if not ids:
        return
    conn.execute(
        update(archival_memories)
        .where(archival_memories.c.agent_id == agent_id, archival_memories.c.id.in_(ids))
        .values(text="")
    )
    versions = archival_memory_versions
    conn.execute(update(versions).where(versions.c.agent_id == agent_id, versions.c.memory_id.in_(ids)).values(text=""))


def rewrite_summaries(conn: Connection, agent_id: int, matcher: TopicMatcher, needles: set[str]) -> int:
    """Every summary (and the current one) without its sentences that match; how many changed."""
    changed = 0
    rows = conn.execute(select(_SUMMARIES.c.id, _SUMMARIES.c.text).where(_SUMMARIES.c.agent_id == agent_id)).all()
    for row_id, value in rows:
        kept, removed = without_matches(value, matcher)
        if removed:
            needles.update(removed)
            conn.execute(update(_SUMMARIES).where(_SUMMARIES.c.id == row_id).values(text=kept))
            changed += 1
    current = conn.execute(select(_AGENTS.c.summary).where(_AGENTS.c.id == agent_id)).scalar_one_or_none() or ""
    kept, removed = without_matches(current, matcher)
    if removed:
        needles.update(removed)
        conn.execute(update(_AGENTS).where(_AGENTS.c.id == agent_id).values(summary=kept))
    return changed


def tombstone_messages(conn: Connection, agent_id: int, matcher: TopicMatcher, needles: set[str], at: datetime) -> int:
    """Replace the text of every message that matches (or holds a removed text) with a tombstone, its tool calls'
    arguments with `{}`; how many."""
    rows = conn.execute(
        select(_MESSAGES.c.id, _MESSAGES.c.role, _MESSAGES.c.content, _MESSAGES.c.tool_calls, _MESSAGES.c.name).where(
            _MESSAGES.c.agent_id == agent_id
        )
    ).all()
    said = [searchable_text(r.role, r.content, r.tool_calls, r.name) or (r.content or "") for r in rows]
    raw = [f"{r.content or ''} {json.dumps(r.tool_calls or [], ensure_ascii=False)}" for r in rows]
    by_words = [matcher.by_words(w) or _holds(w, needles) for w in raw]
    talk = ("user", "assistant")
    rest = [i for i, hit in enumerate(by_words) if not hit and said[i].strip() and rows[i].role in talk]
    for i, hit in zip(rest, matcher.matches([said[i] for i in rest]) if rest else [], strict=True):
        by_words[i] = hit
    count = 0
    for row, hit in zip(rows, by_words, strict=True):
        if not hit or (row.content or "").startswith("[forgotten on "):
            continue
        if row.content:
            needles.add(row.content)
        calls = [{**call, "arguments": "{}"} for call in row.tool_calls or []]
        for call in row.tool_calls or []:
            if call.get("arguments") and call.get("arguments") != "{}":
                needles.add(str(call["arguments"]))
        values: dict[str, Any] = {"content": tombstone(at), "tool_calls": calls or row.tool_calls}
        conn.execute(update(_MESSAGES).where(_MESSAGES.c.id == row.id).values(**values))
        count += 1
    return count


def _holds(value: str, needles: Iterable[str]) -> bool:
    return any(n and n in value for n in needles)


def _scrub(value: str, needles: list[str]) -> str:
    for needle in needles:
        value = value.replace(needle, SCRUBBED)
    return value


def scrub_copies(conn: Connection, agent_id: int, matcher: TopicMatcher, needles: set[str]) -> None:
    """Every stored copy of a removed text replaced by `[forgotten]`: block versions, memory versions, summaries,
    the daemon's inbox (its runs' results too) and its relayed events."""
    ordered = sorted((n for n in needles if len(n.strip()) > 3), key=len, reverse=True)  # longest first
    if not ordered:
        return
    scrub_versions(conn, agent_id, lambda value: _scrub(value, ordered))
    for table, key, columns in (
        (archival_memory_versions, archival_memory_versions.c.id, ("text",)),
        (_SUMMARIES, _SUMMARIES.c.id, ("text",)),
        (inbox, inbox.c.id, ("content",)),
    ):
        rows = conn.execute(select(key, *(table.c[c] for c in columns)).where(table.c.agent_id == agent_id)).all()
        for row in rows:
            new = {c: _scrub(row[i + 1] or "", ordered) for i, c in enumerate(columns)}
            if any(new[c] != (row[i + 1] or "") for i, c in enumerate(columns)):
                conn.execute(update(table).where(key == row[0]).values(**new))
    results = select(inbox.c.id, inbox.c.result).where(inbox.c.agent_id == agent_id, inbox.c.result.is_not(None))
    for row_id, result in conn.execute(results).all():
        cleaned = scrub_value(result, matcher, ordered)
        if cleaned != result:
            conn.execute(update(inbox).where(inbox.c.id == row_id).values(result=cleaned))
    runs = select(inbox.c.run_id).where(inbox.c.agent_id == agent_id)
    for run_id, seq, event in conn.execute(
        select(run_events.c.run_id, run_events.c.seq, run_events.c.event).where(run_events.c.run_id.in_(runs))
    ).all():
        if _holds(event, ordered) or _holds(event, [json.dumps(n)[1:-1] for n in ordered]):
            where = (run_events.c.run_id == run_id, run_events.c.seq == seq)
            conn.execute(delete(run_events).where(*where))


def reset_recall_index(conn: Connection, agent_id: int) -> None:
    """The agent's full-text rows deleted (and the index merged, so no older segment keeps their terms) and its
    watermark cleared: the next search indexes the rewritten messages again."""
    first, *rest = dialect(conn).fulltext_erase
    conn.execute(text(first), {"a": agent_id})
    for statement in rest:
        conn.execute(text(statement))
    conn.execute(delete(recall_watermarks).where(recall_watermarks.c.agent_id == agent_id))


def documents(conn: Connection, agent_id: int) -> set[str]:
    """What the dense recall index may have embedded of the agent's messages (`recall.embedded_documents`)."""
    return embedded_documents(conn, agent_id)


def drop_cached(conn: Connection, texts: Iterable[str]) -> int:
    """Delete the embedding cache entries of `texts` (whatever model); how many."""
    hashes = sorted({text_hash(t) for t in texts if t})
    count = 0
    for start in range(0, len(hashes), 500):
        chunk = hashes[start : start + 500]
        count += conn.execute(delete(embedding_cache).where(embedding_cache.c.text_hash.in_(chunk))).rowcount
    return count


def scrub_value(value: Any, matcher: TopicMatcher, needles: list[str]) -> Any:
    """`value` (JSON) with every removed text in its strings replaced by `[forgotten]`, and every string that still
    holds the query's words replaced whole (a string that is JSON itself: scrubbed inside)."""
    if isinstance(value, str):
        for needle in needles:
            value = value.replace(needle, SCRUBBED)
        if matcher.by_words(value):
            inner = _nested(value, matcher, needles)
            return inner if inner is not None else SCRUBBED
        return value
    if isinstance(value, list):
        return [scrub_value(v, matcher, needles) for v in value]
    if isinstance(value, dict):
        return {k: scrub_value(v, matcher, needles) for k, v in value.items()}
    return value


def _nested(value: str, matcher: TopicMatcher, needles: list[str]) -> str | None:
    """A string that is itself JSON (a request body, tool arguments) scrubbed inside, or None."""
    try:
        inner = json.loads(value)
    except (json.JSONDecodeError, ValueError):
        return None
    if not isinstance(inner, dict | list):
        return None
    return json.dumps(scrub_value(inner, matcher, needles), ensure_ascii=False)
