"""Archival memory's SQL side (`memory.archival`, `memory.ledger`): the memories, their versions and the statistics'
revision; this database's identity, which every vector-store point it writes carries; and `archival_rekeys`/
`archival_rekeyed_stores`, the pending re-keying of vector-store points written before the agent's id became the
key (migration 0002, `memory.rekey`)."""

from __future__ import annotations

from sqlalchemy import JSON, BigInteger, Column, DateTime, Float, Integer, String, Table
from sqlmodel import SQLModel

from pagemind.runtime.crypto.columns import EncryptedJSON, EncryptedText

archival_memories = Table(
    "archival_memories",
    SQLModel.metadata,
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
    SQLModel.metadata,
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
    SQLModel.metadata,
    Column("agent_id", Integer, primary_key=True, autoincrement=False),
    Column("revision", BigInteger, nullable=False),
)

# This database's identity (one row, made by migration 0004): every vector-store point this database writes
# carries it as `origin`, so a reconcile deletes a point without a row only when it is provably this database's
# (a store shared by two databases, by mistake, loses nothing).
database_identity = Table(
    "database_identity",
    SQLModel.metadata,
    Column("id", String(36), primary_key=True),
    Column("created_at", DateTime(timezone=True), nullable=False),
)

# Vector-store points written before migration 0002 carry the agent's NAME as their `agent_id`. The migration
# records each name with the id that replaces it; `memory.rekey` re-keys a store's points when it first opens
# the store, then marks the store done. Rows stay: another store (another embedding model's) may still need them.
archival_rekeys = Table(
    "archival_rekeys",
    SQLModel.metadata,
    Column("old_key", String(128), primary_key=True),
    Column("agent_id", Integer, nullable=False),
)

archival_rekeyed_stores = Table(
    "archival_rekeyed_stores",
    SQLModel.metadata,
    Column("store", String(512), primary_key=True),
    Column("at", DateTime(timezone=True), nullable=False),
)
