"""An agent's rows erased from SQL, and the database compacted so that no page or WAL frame keeps them.

Every table with an `agent_id` column loses the agent's rows (a table added later is covered without a change
here), then `run_events` (keyed by the agent's runs), the recall full-text index (FTS5 on SQLite, a tsvector table
on Postgres), the embedding cache entries that only this agent's texts produced, and the agent's own row.

The deletes run in one secure transaction and `compact` truncates the WAL (`state.secure_delete`: on SQLite freed
space is overwritten with zeros, and the log's frames that held the rows go); the FTS5 index is merged
(`optimize`: a deleted row's terms otherwise stay in its older segments). Postgres keeps deleted rows as dead
tuples until VACUUM: the docs' operations page says how to run it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import structlog
from sqlalchemy import delete, or_, select, text
from sqlalchemy.engine import Connection, Engine

from pagemind.runtime.crypto.columns import cipher_of
from pagemind.runtime.memory.embedding.cache import text_hash
from pagemind.runtime.memory.recall.indexes import embedded_documents
from pagemind.runtime.state.dialects import dialect
from pagemind.runtime.state.secure_delete import in_secure_transaction, truncate_log
from pagemind.runtime.state.tables.agents import AgentRow
from pagemind.runtime.state.tables.archival import archival_memories, archival_memory_versions
from pagemind.runtime.state.tables.conversation import MessageRow
from pagemind.runtime.state.tables.daemon import inbox, run_events
from pagemind.runtime.state.tables.memory import embedding_cache
from pagemind.runtime.state.tables.schema import metadata, table_of
from pagemind.runtime.state.tables.security import purges

log = structlog.get_logger("pagemind.erasure")

_AGENTS, _MESSAGES = table_of(AgentRow), table_of(MessageRow)
_CHUNK = 500  # values per IN list


def erase_rows(
    engine: Engine, agent_id: int, then: Callable[[Connection, dict[str, int]], None] | None = None
) -> dict[str, int]:
    """Delete every row of the agent, in one secure transaction (`then(conn)` runs in it last: the purge's
    progress); rows deleted per table."""

    def work(conn: Connection) -> dict[str, int]:
        counts = _erase(conn, agent_id)
        if then is not None:
            then(conn, counts)
        return counts

    return in_secure_transaction(engine, work)


def _erase(conn: Connection, agent_id: int) -> dict[str, int]:
    counts = {"embedding_cache": _erase_cache(conn, agent_id), "recall_fts": _erase_fulltext(conn, agent_id)}
    runs = select(inbox.c.run_id).where(inbox.c.agent_id == agent_id)
    counts["run_events"] = conn.execute(delete(run_events).where(run_events.c.run_id.in_(runs))).rowcount
    for table in reversed(metadata.sorted_tables):  # children before the tables their foreign keys name
        if "agent_id" in table.c and table is not purges:
            counts[table.name] = conn.execute(delete(table).where(table.c.agent_id == agent_id)).rowcount
    counts["agents"] = conn.execute(delete(_AGENTS).where(_AGENTS.c.id == agent_id)).rowcount
    return {name: count for name, count in counts.items() if count}


def _erase_fulltext(conn: Connection, agent_id: int) -> int:
    first, *rest = dialect(conn).fulltext_erase
    count = conn.execute(text(first), {"a": agent_id}).rowcount
    for statement in rest:
        conn.execute(text(statement))
    return count


def _texts(conn: Connection, agent_id: int) -> set[str]:
    """Every text of the agent the embedding cache may hold a vector of: its memories (every version) and what
    the recall index embeds of its messages."""
    texts = set(
        conn.execute(select(archival_memories.c.text).where(archival_memories.c.agent_id == agent_id)).scalars()
    )
    versions = archival_memory_versions
    texts |= set(conn.execute(select(versions.c.text).where(versions.c.agent_id == agent_id)).scalars())
    return texts | embedded_documents(conn, agent_id)


def _erase_cache(conn: Connection, agent_id: int) -> int:
    """Delete the cache entries of the agent's texts that no other agent's texts also produced (whatever model)."""
    cipher = cipher_of(conn)
    ours = {text_hash(t, cipher): t for t in _texts(conn, agent_id)}
    if not ours:
        return 0
    shared: set[str] = set()
    for other in _agents_sharing(conn, agent_id, list(ours.values())):
        shared |= {text_hash(t, cipher) for t in _texts(conn, other)}
    doomed = [h for h in ours if h not in shared]
    return sum(
        conn.execute(delete(embedding_cache).where(embedding_cache.c.text_hash.in_(chunk))).rowcount
        for chunk in _chunks(doomed)
    )


def _agents_sharing(conn: Connection, agent_id: int, texts: list[str]) -> set[int]:
    """Other agents with a memory or a message that says one of `texts` or one of the agent's messages: only their
    texts can have produced the same cache entries (a recall document holds its message's text)."""
    said = list(
        conn.execute(
            select(_MESSAGES.c.content).where(_MESSAGES.c.agent_id == agent_id, _MESSAGES.c.content.is_not(None))
        ).scalars()
    )
    others: set[int] = set()
    for chunk in _chunks(sorted(set(texts) | set(said))):
        for table, column in (
            (_MESSAGES, _MESSAGES.c.content),
            (archival_memories, archival_memories.c.text),
            (archival_memory_versions, archival_memory_versions.c.text),
        ):
            found = select(table.c.agent_id).where(table.c.agent_id != agent_id, or_(column.in_(chunk)))
            others |= set(conn.execute(found.distinct()).scalars())
    return others


def _chunks(values: list[str]) -> Iterator[list[str]]:
    for start in range(0, len(values), _CHUNK):
        yield values[start : start + _CHUNK]


def compact(engine: Engine, tries: int = 5) -> bool:
    """The WAL truncated so that the frames that held the deleted rows are gone (`state.secure_delete`), tried
    `tries` times; False when a reader kept it from finishing (the purge stays recorded and the next open compacts
    again)."""
    if truncate_log(engine, tries):
        return True
    log.warning("purge_checkpoint_busy", detail="a reader kept the WAL from being truncated; the next open retries")
    return False
