"""Recall memory's full-text index: the database's own (SQLite FTS5 with BM25; Postgres `tsvector` with `ts_rank`).

Each message is indexed as `[date] role: text` (its own words) with the messages before it in its session as context
(`recall_context_messages`, default 2: a reply often names its subject only in the question two turns up). What is
indexed is bounded, alike on both databases: the first `INDEX_CHARS` characters of a message's text, and at most
`OWN_BYTES`/`CONTEXT_BYTES` of analysed terms, so a huge message (Postgres refuses a `tsvector` over 1 MB) is
indexed in part and stays findable by its beginning. With encryption at rest on, every term is stored and matched as
its keyed hash (a blind index: `runtime.crypto.cipher`). A message the database still refuses as data is skipped with
a warning: the watermark moves past it, so one odd message can never stop every later search.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import structlog
from sqlalchemy import text as sql
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import DBAPIError

from pagemind.runtime.crypto.columns import cipher_of
from pagemind.runtime.memory.retrieval.keywords import analysed
from pagemind.runtime.state.dialects import dialect

log = structlog.get_logger("pagemind.recall")

INDEX_CHARS = 100_000  # of a message's text, for both indexes (full text and dense)
# A tsvector takes at most ~4 bytes per byte of analysed text (terms ≥ 1 byte + a space, 4 bytes an entry, 2 a
# position): 192 + 16 KB stays far below Postgres' 1 MB limit. The context is a hint at the subject: a huge
# previous message must not swamp the message it precedes.
OWN_BYTES, CONTEXT_BYTES = 192 * 1024, 16 * 1024


@dataclass
class IndexedMessage:
    """A message as the recall index keys it."""

    id: int
    role: str
    created_at: datetime
    text: str
    context: str = ""  # the message before it in the same session (both indexes)
    earlier: str = ""  # the messages before that one (the keyword index only: `recall_context_messages`)

    def own_document(self) -> str:
        """`[date] role: text`: what the message itself says, and when."""
        return f"[{self.created_at:%-d %B %Y}] {self.role}: {self.text}"

    def keyed_document(self) -> str:
        """The message with the one before it (same session) as context: what the dense index embeds."""
        own = self.own_document()
        return f"{own} (after: {self.context})" if self.context else own


def clip_terms(terms: str, limit: int) -> str:
    """Analysed terms cut to at most `limit` UTF-8 bytes, at a term boundary."""
    data = terms.encode()
    if len(data) <= limit:
        return terms
    return data[: limit + 1].decode(errors="ignore").rsplit(" ", 1)[0]


def _refused_as_data(exc: DBAPIError) -> bool:
    # SQLSTATE class 22 (data exception) or 54 (program limit exceeded): this message, not the database, is the
    # problem. Anything else (a lost connection) must fail the search rather than skip messages silently.
    state = str(getattr(exc.orig, "sqlstate", "") or "")
    return state[:2] in ("22", "54")


class FullText:
    """The dialect-specific full-text index over messages (rowid = message id). Its tables (`recall_fts`,
    `recall_watermarks`) are the schema's (`state.tables.memory`, created by migration 0001)."""

    def __init__(self, engine: Engine):
        self.engine = engine
        self.dialect = dialect(engine)  # the index's statements are the backend's (`state.dialects`)

    def watermark(self, agent_id: int) -> int:
        """The last message id indexed for the agent."""
        with self.engine.connect() as conn:
            value = conn.execute(
                sql("SELECT message_id FROM recall_watermarks WHERE agent_id = :a"), {"a": agent_id}
            ).scalar()
        return int(value or 0)

    def add(self, agent_id: int, messages: Sequence[IndexedMessage], last_id: int) -> None:
        """Index messages and move the agent's watermark to `last_id`, in one transaction."""
        rows = [self._row(agent_id, m) for m in messages]
        with self.engine.begin() as conn:
            try:
                with self._statement(conn):
                    self._insert(conn, rows)
            except DBAPIError as exc:
                if not _refused_as_data(exc):
                    raise
                self._insert_one_by_one(conn, rows)
            self._move_watermark(conn, agent_id, last_id)

    def _statement(self, conn: Connection) -> Any:
        # A failed statement must not take the rest of the transaction with it (`Dialect.savepoint_per_statement`).
        return conn.begin_nested() if self.dialect.savepoint_per_statement else contextlib.nullcontext()

    def _row(self, agent_id: int, m: IndexedMessage) -> dict[str, object]:
        own = clip_terms(self._blinded(analysed(m.own_document())), OWN_BYTES)
        context = clip_terms(self._blinded(analysed(f"{m.context} {m.earlier}")), CONTEXT_BYTES)
        return self.dialect.fulltext_row(m.id, agent_id, own, context)

    def _blinded(self, terms: str) -> str:
        # With encryption on, the index holds keyed hashes of the terms, never the terms (`runtime.crypto.cipher`).
        cipher = cipher_of(self.engine)
        return cipher.blind_terms(terms) if cipher is not None else terms

    def _insert(self, conn: Connection, rows: list[dict[str, object]]) -> None:
        if rows:
            conn.execute(sql(self.dialect.fulltext_insert), rows)

    def _insert_one_by_one(self, conn: Connection, rows: list[dict[str, object]]) -> None:
        for row in rows:
            try:
                with self._statement(conn):
                    self._insert(conn, [row])
            except DBAPIError as exc:
                if not _refused_as_data(exc):
                    raise
                log.warning("recall_index_skipped", message_id=row["id"], error=str(exc.orig).splitlines()[0])

    def _move_watermark(self, conn: Connection, agent_id: int, last_id: int) -> None:
        conn.execute(sql(self.dialect.watermark_upsert), {"a": agent_id, "m": last_id})

    def search(self, agent_id: int, terms: list[str], own_weight: float) -> dict[int, float]:
        """BM25-style scores of the agent's messages matching any of the terms (higher is better)."""
        if not terms:
            return {}
        if (cipher := cipher_of(self.engine)) is not None:
            terms = [cipher.blind(t) for t in terms]
        with self.engine.connect() as conn:
            return dict(self.dialect.fulltext_search(conn, agent_id, terms, own_weight))
