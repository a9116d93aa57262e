"""The database schema, defined once: every table and index pagemind keeps in SQL.

Nothing else creates or alters a table: the versioned migrations in `migrations/versions/` bring a database to
this shape when a store opens (`state.migrate`), and `python -m pagemind.runtime.state.migrations revision
--autogenerate -m "…"` writes the next migration from the difference between these definitions and the head.

- Agent state (SQLModel rows, read and written by `StateStore`): `agents`, `blocks`, `block_versions`,
  `messages`, `summaries`, `steps`, `turn_keys` (idempotency keys).
- Archival memory's SQL side (`memory.archival`, `memory.ledger`): `archival_memories`, `archival_memory_versions`,
  `archival_revisions`, `database_identity`, and
  `archival_rekeys`/`archival_rekeyed_stores`, the pending re-keying of vector-store points written before the
  agent's id became the key (migration 0002).
- `embedding_cache` (`memory.embeddings`): one vector per model and text hash.
- Recall memory's full-text index (`memory.recall`): `recall_watermarks` here, and `recall_fts`, which is
  dialect-specific (an FTS5 virtual table on SQLite, a table with a `tsvector` column and a GIN index on
  Postgres) and therefore created by raw DDL in migration 0001 rather than declared below; autogenerate ignores
  every table whose name starts with `recall_fts` (on SQLite: the FTS5 shadow tables too; `migrate.include_name`).
- The daemon's (`scheduler`, migration 0005): `inbox` (every accepted message and job, with its state and
  lease), `agent_leases` (which daemon process runs an agent's work now), `agent_origins` (the template an agent
  was made from), `trigger_fires` (when each schedule last fired) and `daemons` (the processes serving); and
  (migration 0007) `run_events`, a run's events relayed to watchers in other daemon processes, and the inbox's
  `watcher` column.
- Reflection's (`runtime.reflection`, migration 0006): `reflections`, one row per reflection of an agent.
- The API's keys (`runtime.state.keys`, migration 0008): `api_keys` (hashes only), and `agents.owner`, the end user
  an agent belongs to.
- Erasure's (`runtime.erasure`, migration 0009): `purges`, the agents being erased.
- Privacy's (`runtime.privacy`, migration 0011): `pii_keys`, `pii_placeholders` (redaction's numbering, as keyed
  hashes) and `pii_originals` (for `privacy.keep_originals`, once encryption at rest exists).
- Forget and mute's, review's (`runtime.memory.topics`, `runtime.memory.review`, migration 0012): `muted_topics`, the
  topics an agent must not bring up; `memory_reviews`, the memories waiting for a person's review.
- Encryption at rest's (`runtime.state.encryption`, migration 0013): `data_keys`, the key-check record. The text
  columns declared `EncryptedText`/`EncryptedJSON` (`runtime.crypto.columns`) are sealed when the engine has a key.

Every `agent_id` column holds `agents.id`. (The archival tables carry no foreign key: the archival service also
runs on its own over a bare engine, in benchmarks.)
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Column,
    DateTime,
    Float,
    Index,
    Integer,
    LargeBinary,
    String,
    Table,
    Text,
    UniqueConstraint,
)
from sqlmodel import Field, SQLModel

from pagemind.runtime.crypto.columns import EncryptedJSON, EncryptedText
from pagemind.runtime.state.records import utcnow

metadata = SQLModel.metadata


def table_of(row: type[SQLModel]) -> Table:
    """The Core table of a SQLModel table class (for statements that skip the ORM)."""
    table: Table = row.__table__  # type: ignore[attr-defined]  # every table class has one; SQLModel's stubs lack it
    return table


# -- agent state ------------------------------------------------------------------------------------------------


class AgentRow(SQLModel, table=True):
    """An agent: its name (unique, changeable with `StateStore.rename_agent`), its last spec and window state."""

    __tablename__ = "agents"
    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(index=True, unique=True)
    spec_hash: str
    spec_json: str = Field(sa_column=Column(EncryptedText, nullable=False))
    summary: str = Field(default="", sa_column=Column(EncryptedText, nullable=False, default=""))
    pressure_warned: bool = False
    token_correction: float = 1.0
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
    # The end user it belongs to (migration 0008): a user key of the API reaches only the agents it owns; NULL for
    # an agent of nobody's (only admin keys reach it). Written by `state.keys` alone.
    owner: str | None = Field(default=None, sa_column=Column(String(128), nullable=True, index=True))


class SummaryRow(SQLModel, table=True):
    """Every recursive summary ever made, with the eviction that made it."""

    __tablename__ = "summaries"
    id: int | None = Field(default=None, primary_key=True)
    agent_id: int = Field(foreign_key="agents.id", index=True)
    text: str = Field(sa_column=Column(EncryptedText, nullable=False))
    evicted_count: int
    first_message_id: int | None = None
    last_message_id: int | None = None
    tokens_before: int
    tokens_after: int
    created_at: datetime = Field(default_factory=utcnow)


class BlockRow(SQLModel, table=True):
    """A core-memory block's current value."""

    __tablename__ = "blocks"
    __table_args__ = (UniqueConstraint("agent_id", "label"),)
    id: int | None = Field(default=None, primary_key=True)
    agent_id: int = Field(foreign_key="agents.id", index=True)
    label: str
    value: str = Field(sa_column=Column(EncryptedText, nullable=False))
    char_limit: int
    description: str = ""
    read_only: bool = False
    updated_at: datetime = Field(default_factory=utcnow)
    # Incremented by every edit; a step's commit writes a block only at the version its process read (migration
    # 0003), so a write computed from a stale value fails instead of silently losing another process's edit.
    version: int = Field(default=0, sa_column=Column(Integer, nullable=False, server_default="0"))


class BlockVersionRow(SQLModel, table=True):
    """One edit of a block (by a tool call, or a reset from the YAML)."""

    __tablename__ = "block_versions"
    id: int | None = Field(default=None, primary_key=True)
    agent_id: int = Field(foreign_key="agents.id", index=True)
    label: str
    step_id: int | None = None
    operation: str
    old_value: str = Field(sa_column=Column(EncryptedText, nullable=False))
    new_value: str = Field(sa_column=Column(EncryptedText, nullable=False))
    created_at: datetime = Field(default_factory=utcnow)


class MessageRow(SQLModel, table=True):
    """One message; never deleted (eviction only clears `in_context`), so this is also recall memory."""

    __tablename__ = "messages"
    __table_args__ = (Index("ix_messages_agent_context", "agent_id", "in_context", "id"),)
    id: int | None = Field(default=None, primary_key=True)
    agent_id: int = Field(foreign_key="agents.id")
    turn_id: str | None = None
    step_id: int | None = None
    role: str
    content: str | None = Field(default=None, sa_column=Column(EncryptedText, nullable=True))
    tool_calls: list[dict[str, Any]] | None = Field(default=None, sa_column=Column(EncryptedJSON, nullable=True))
    tool_call_id: str | None = None
    name: str | None = None
    is_error: bool = False
    in_context: bool = True
    created_at: datetime = Field(default_factory=utcnow)


class StepRow(SQLModel, table=True):
    """One model call of a turn, with its timings and token counts."""

    __tablename__ = "steps"
    id: int | None = Field(default=None, primary_key=True)
    agent_id: int = Field(foreign_key="agents.id", index=True)
    turn_id: str
    step_index: int
    model: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    stop_reason: str | None = None
    started_at: datetime
    model_ms: float
    total_ms: float
    cached_tokens: int | None = None  # migration 0010: the provider's prompt-cache hits, of prompt_tokens


class TurnKeyRow(SQLModel, table=True):
    """An idempotency key of a turn: stored with the turn's user message, in one transaction (migration 0003)."""

    __tablename__ = "turn_keys"
    agent_id: int = Field(foreign_key="agents.id", primary_key=True)
    key: str = Field(sa_column=Column(String(200), primary_key=True))
    turn_id: str = Field(sa_column=Column(String(64), nullable=False))
    created_at: datetime = Field(default_factory=utcnow)


# -- archival memory --------------------------------------------------------------------------------------------

archival_memories = Table(
    "archival_memories",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("agent_id", Integer, nullable=False, index=True),
    Column("user_id", String(128), nullable=True),
    Column("text", EncryptedText, nullable=False),
    Column("kind", String(32), nullable=False),
    Column("importance", Float, nullable=False),
    Column("tags", JSON, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("updated_at", DateTime(timezone=True), nullable=False),
    Column("last_hit_at", DateTime(timezone=True), nullable=True),
    Column("hit_count", Integer, nullable=False, default=0),
    Column("source_message_ids", JSON, nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=True),
    Column("superseded_by", String(36), nullable=True),
    # The order of writes that keeps this row and its vector-store point in agreement (memory.ledger): a row is
    # written first as 'inserting' and becomes 'live' once its point is stored, and is 'forgetting' between a
    # forget's start and its point's deletion; `write_token` is set while a change to the point is in flight
    # (since `write_started`, wall clock); `supersedes` names the memory an inserting row will supersede when it
    # completes. Only 'live' rows are listed, counted and searchable.
    Column("state", String(16), nullable=False, server_default="live"),
    Column("write_token", String(32), nullable=True),
    Column("write_started", DateTime(timezone=True), nullable=True),
    Column("supersedes", String(36), nullable=True),
)

archival_memory_versions = Table(
    "archival_memory_versions",
    metadata,
    Column("id", Integer, primary_key=True, autoincrement=True),
    Column("agent_id", Integer, nullable=False, index=True),
    Column("memory_id", String(36), nullable=False, index=True),
    Column("operation", String(32), nullable=False),
    Column("text", EncryptedText, nullable=False),
    Column("detail", EncryptedJSON, nullable=False),
    Column("at", DateTime(timezone=True), nullable=False),
)

# One counter per agent, moved by every transaction that changes what its memory statistics show (a memory
# becoming live, refreshed, superseded or forgotten): `ArchivalService.stats` reads this one row to know whether
# its cached count and tags still hold, whichever process or service instance wrote.
archival_revisions = Table(
    "archival_revisions",
    metadata,
    Column("agent_id", Integer, primary_key=True, autoincrement=False),
    Column("revision", BigInteger, nullable=False),
)

# This database's identity (one row, made by migration 0004): every vector-store point this database writes
# carries it as `origin`, so a reconcile deletes a point without a row only when it is provably this database's
# (a store shared by two databases, by mistake, loses nothing).
database_identity = Table(
    "database_identity",
    metadata,
    Column("id", String(36), primary_key=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

# Vector-store points written before migration 0002 carry the agent's NAME as their `agent_id`. The migration
# records each name with the id that replaces it; `memory.rekey` re-keys a store's points when it first opens
# the store, then marks the store done. Rows stay: another store (another embedding model's) may still need them.
archival_rekeys = Table(
    "archival_rekeys",
    metadata,
    Column("old_key", String(128), primary_key=True),
    Column("agent_id", Integer, nullable=False),
)

archival_rekeyed_stores = Table(
    "archival_rekeyed_stores",
    metadata,
    Column("store", String(512), primary_key=True),
    Column("at", DateTime(timezone=True), nullable=False),
)


# -- embeddings and recall --------------------------------------------------------------------------------------

embedding_cache = Table(
    "embedding_cache",
    metadata,
    Column("model", String(128), primary_key=True),
    Column("text_hash", String(64), primary_key=True),
    Column("dim", Integer, nullable=False),
    Column("vector", LargeBinary, nullable=False),
)

recall_watermarks = Table(
    "recall_watermarks",
    metadata,
    Column("agent_id", Integer, primary_key=True, autoincrement=False),
    Column("message_id", BigInteger, nullable=False),
)


# -- the daemon (scheduler) ---------------------------------------------------------------------------------------

# Every accepted piece of work for an agent: a user's message, a trigger's message, a maintenance job. It is
# committed before the API answers. pending → running (owner, lease_expires_at) → done | failed; `id` is the
# arrival order, and an agent's work runs in that order, one item at a time. (agent_id, idempotency_key) is
# unique, so a retried submission finds the first one.
inbox = Table(
    "inbox",
    metadata,
    Column("id", BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True),
    Column("run_id", String(32), nullable=False, unique=True),
    Column("agent_id", Integer, nullable=False),
    Column("kind", String(16), nullable=False),  # message | job
    Column("content", EncryptedText, nullable=False),  # the message's text, or the job's name
    Column("idempotency_key", String(200), nullable=True),
    Column("state", String(16), nullable=False),  # pending | running | done | failed
    Column("owner", String(64), nullable=True),
    Column("lease_expires_at", DateTime(timezone=True), nullable=True),
    Column("attempts", Integer, nullable=False, default=0),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("started_at", DateTime(timezone=True), nullable=True),
    Column("finished_at", DateTime(timezone=True), nullable=True),
    Column("result", EncryptedJSON, nullable=True),  # reply, stop reason, steps (for `GET /v1/runs/{id}`)
    Column("error", Text, nullable=True),
    # Who streams the run's events (migration 0007): the daemon id of the one watcher, "*" for several, NULL for
    # none. The daemon that runs the item relays its events (`run_events`) when someone other than itself watches.
    Column("watcher", String(64), nullable=True),
    UniqueConstraint("agent_id", "idempotency_key", name="uq_inbox_agent_key"),
    Index("ix_inbox_agent_state", "agent_id", "state", "id"),
    Index("ix_inbox_state", "state", "id"),
)

# Which daemon process runs an agent's work now, until when: the one owner that keeps an agent's order across
# processes. A lease past `expires_at` may be taken by anyone (its owner died).
agent_leases = Table(
    "agent_leases",
    metadata,
    Column("agent_id", Integer, primary_key=True, autoincrement=False),
    Column("owner", String(64), nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=False),
)

# An agent made through the API from a template: its spec is the template's (renamed), read again on each turn,
# so a change to the template reaches it; `blocks` holds the initial values given at creation.
agent_origins = Table(
    "agent_origins",
    metadata,
    Column("agent_id", Integer, primary_key=True, autoincrement=False),
    Column("template", String(128), nullable=True),
    Column("blocks", JSON, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

# When each of an agent's triggers last fired (the trigger's key is stable across restarts: its kind and its
# definition), so a restart knows what it missed: `fired_at` is the due time of the last firing handled (fired,
# or skipped by `missed: skip`), or when the trigger was first seen; it only moves forward (scheduler.triggers.rules).
trigger_fires = Table(
    "trigger_fires",
    metadata,
    Column("agent_id", Integer, primary_key=True, autoincrement=False),
    Column("trigger_key", String(200), primary_key=True),
    Column("fired_at", DateTime(timezone=True), nullable=False),
)

# The daemon processes serving this database, with the URL they answer on: `pagemind run` sends through a live
# one instead of fighting it for the stores.
daemons = Table(
    "daemons",
    metadata,
    Column("id", String(64), primary_key=True),
    Column("url", String(512), nullable=False),
    Column("pid", Integer, nullable=False),
    Column("host", String(255), nullable=False),
    Column("started_at", DateTime(timezone=True), nullable=False),
    Column("heartbeat_at", DateTime(timezone=True), nullable=False),
)


# A run's events, relayed by the daemon that runs it to watchers in other daemon processes (`scheduler.streams.relay`,
# migration 0007): one row per event, `seq` its place in the run (the attempt in the high 32 bits, so a re-run
# after a crash follows the first attempt's events), `event` its trace line (`runtime.events`) as JSON text. Rows
# are written only for runs someone in another process watches, and deleted `events_keep_s` after they were.
# Migration 0007 creates it UNLOGGED on Postgres (no WAL: a write commits without waiting for a flush).
run_events = Table(
    "run_events",
    metadata,
    Column("run_id", String(32), primary_key=True),
    Column("seq", BigInteger, primary_key=True, autoincrement=False),
    Column("at", DateTime(timezone=True), nullable=False),
    Column("event", EncryptedText, nullable=False),
    Index("ix_run_events_at", "at"),
)


# -- API keys (`runtime.state.keys`, migration 0008) ------------------------------------------------------------

# A key of the daemon's API: only its SHA-256 is kept (the key itself is shown once, when made). `id` is its public
# name (listed, and accepted by `keys revoke`); `user_id` the end user a user key acts for (NULL for an admin key);
# `scope` "user" or "admin"; a revoked key keeps its row (`revoked_at`), so a listing shows when it stopped.
api_keys = Table(
    "api_keys",
    metadata,
    Column("id", String(32), primary_key=True),
    Column("key_hash", String(64), nullable=False, unique=True),
    Column("user_id", String(128), nullable=True),
    Column("scope", String(16), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("revoked_at", DateTime(timezone=True), nullable=True),
    Index("ix_api_keys_user", "user_id"),
)


# -- reflection (`runtime.reflection`, migration 0006) -------------------------------------------------------------

# One row per reflection of an agent: running → applying (its validated plan stored, so a rerun after a crash
# applies the same plan, each change idempotent) → done; or invalid (bad model output, nothing applied), failed
# (the model call failed). "Since the last reflection" is after the newest message a done reflection covered
# (`last_message_id`).
reflections = Table(
    "reflections",
    metadata,
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


# -- erasure (`runtime.erasure`, migration 0009) ----------------------------------------------------------------------

# One row per agent being erased, written before anything of it is erased and deleted when nothing is left: an
# agent with a row here is invisible (every listing leaves it out; its name was changed in the same transaction),
# and the next process that opens the stores finishes its purge. `name`: its name when the purge began (its trace
# folder); `step`: `recorded`, then `erased` once its rows are gone (only the compaction is left); `counts`: what
# was erased so far, per store.
purges = Table(
    "purges",
    metadata,
    Column("agent_id", Integer, primary_key=True, autoincrement=False),
    Column("name", String(255), nullable=False),
    Column("step", String(16), nullable=False),
    Column("attempts", Integer, nullable=False),
    Column("counts", JSON, nullable=False),
    Column("requested_at", DateTime(timezone=True), nullable=False),
)


# -- privacy (`runtime.privacy`, migration 0011) ---------------------------------------------------------------------

# Redaction's numbering per agent: `pii_keys` holds the agent's random HMAC key; `pii_placeholders` the keyed hash
# (never the value) of each redacted value and its number per kind (`[phone#2]`). `pii_originals` holds the
# originals for `privacy.keep_originals`; the key and the originals are sealed when the store is encrypted.
pii_keys = Table(
    "pii_keys",
    metadata,
    Column("agent_id", Integer, primary_key=True, autoincrement=False),
    Column("key", EncryptedText, nullable=False),  # base64, sealed under a data key: no guessing
)
pii_placeholders = Table(
    "pii_placeholders",
    metadata,
    Column("agent_id", Integer, primary_key=True, autoincrement=False),
    Column("kind", String(16), primary_key=True),
    Column("number", Integer, primary_key=True, autoincrement=False),
    Column("digest", String(64), nullable=False),
    UniqueConstraint("agent_id", "digest", name="uq_pii_placeholders_digest"),
)
pii_originals = Table(
    "pii_originals",
    metadata,
    Column("agent_id", Integer, primary_key=True, autoincrement=False),
    Column("kind", String(16), primary_key=True),
    Column("number", Integer, primary_key=True, autoincrement=False),
    Column("value", EncryptedText, nullable=False),
)

# -- forget and mute by request (`runtime.memory.topics`, migration 0012) --------------------------------------------

# A topic the user asked the agent not to bring up, until unmuted: memories and messages that touch it (by keywords
# or by meaning) are left out of prefetch, search results, extraction and reflection.
muted_topics = Table(
    "muted_topics",
    metadata,
    Column("agent_id", Integer, primary_key=True, autoincrement=False),
    Column("topic", String(200), primary_key=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

# A memory held for a person's review (`memory.review: required`, `runtime.memory.review`): what would have been
# stored, who proposed it (`origin`), and the memory it supersedes once approved. Never searched or prefetched; the
# row goes when the memory is approved (and then written through the archival write path) or rejected.
memory_reviews = Table(
    "memory_reviews",
    metadata,
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

# -- encryption at rest (`runtime.state.encryption`, migration 0013) --------------------------------------------------

# The key-check record: which data key this database's text is sealed under (`role` "current"), and during a
# rotation the key it is moving to ("next"). `check` is a known text sealed under the key (a wrong key fails to open
# it: a clear error, never garbage); `index_key` the blind index's and the embedding cache's key, sealed under it
# (the same index key under every data key, so a rotation rebuilds no index). No row: encryption off.
data_keys = Table(
    "data_keys",
    metadata,
    Column("role", String(16), primary_key=True),
    Column("key_id", String(16), nullable=False),
    Column("check_value", Text, nullable=False),
    Column("index_key", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
)
