"""The other memory tiers' tables and memory's curation: the embedding cache (`memory.embeddings`: one vector per
model and text hash), recall's watermarks (`memory.recall`), the topics an agent must not bring up and the memories
waiting for a person's review (`memory.topics`, `memory.review`), and reflections (`runtime.reflection`).

Recall's full-text index, `recall_fts`, is dialect-specific (an FTS5 virtual table on SQLite, a table with a
`tsvector` column and a GIN index on Postgres) and therefore created by raw DDL in migration 0001 rather than
declared here; autogenerate ignores every table whose name starts with `recall_fts` (on SQLite: the FTS5 shadow
tables too; `migrate.include_name`).
"""

from __future__ import annotations

from sqlalchemy import JSON, BigInteger, Column, DateTime, Float, Index, Integer, LargeBinary, String, Table, Text
from sqlmodel import SQLModel

from pagemind.runtime.crypto.columns import EncryptedJSON, EncryptedText

# -- embeddings and recall --------------------------------------------------------------------------------------

embedding_cache = Table(
    "embedding_cache",
    SQLModel.metadata,
    Column("model", String(128), primary_key=True),
    Column("text_hash", String(64), primary_key=True),
    Column("dim", Integer, nullable=False),
    Column("vector", LargeBinary, nullable=False),
)

recall_watermarks = Table(
    "recall_watermarks",
    SQLModel.metadata,
    Column("agent_id", Integer, primary_key=True, autoincrement=False),
    Column("message_id", BigInteger, nullable=False),
)


# -- reflection (`runtime.reflection`, migration 0006) -------------------------------------------------------------

# One row per reflection of an agent: running → applying (its validated plan stored, so a rerun after a crash
# applies the same plan, each change idempotent) → done; or invalid (bad model output, nothing applied), failed
# (the model call failed). "Since the last reflection" is after the newest message a done reflection covered
# (`last_message_id`).
reflections = Table(
    "reflections",
    SQLModel.metadata,
    Column("id", String(36), primary_key=True),
    Column("agent_id", Integer, nullable=False),
    Column("started_at", DateTime(timezone=True), nullable=False),
    Column("finished_at", DateTime(timezone=True), nullable=True),
    Column("last_message_id", BigInteger, nullable=False),
    Column("status", String(16), nullable=False),
    Column("counts", JSON, nullable=False),
    Column("plan", EncryptedJSON, nullable=True),
    Column("error", Text, nullable=True),
    Index("ix_reflections_agent", "agent_id", "started_at"),
)


# -- forget and mute by request (`runtime.memory.topics`, migration 0012) --------------------------------------------

# A topic the user asked the agent not to bring up, until unmuted: memories and messages that touch it (by keywords
# or by meaning) are left out of prefetch, search results, extraction and reflection.
muted_topics = Table(
    "muted_topics",
    SQLModel.metadata,
    Column("agent_id", Integer, primary_key=True, autoincrement=False),
    Column("topic", String(200), primary_key=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

# A memory held for a person's review (`memory.review: required`, `runtime.memory.review`): what would have been
# stored, who proposed it (`origin`), and the memory it supersedes once approved. Never searched or prefetched; the
# row goes when the memory is approved (and then written through the archival write path) or rejected.
memory_reviews = Table(
    "memory_reviews",
    SQLModel.metadata,
    Column("id", String(36), primary_key=True),
    Column("agent_id", Integer, nullable=False, index=True),
    Column("origin", String(32), nullable=False),
    Column("text", EncryptedText, nullable=False),
    Column("kind", String(32), nullable=False),
    Column("importance", Float, nullable=True),
    Column("tags", JSON, nullable=False),
    Column("source_message_ids", JSON, nullable=False),
    Column("supersedes", String(36), nullable=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
)
