"""What guards an agent's data: the API's keys (`runtime.state.keys`, migration 0008: hashes only; `agents.owner`
is in `tables.agents`), erasure's purges (`runtime.erasure`, migration 0009), privacy's redaction numbering and
kept originals (`runtime.privacy`, migration 0011) and encryption at rest's key check (`runtime.state.encryption`,
migration 0013). The text columns declared `EncryptedText`/`EncryptedJSON` (`runtime.crypto.columns`), in every
module of `state.tables`, are sealed when the engine has a key."""

from __future__ import annotations

from sqlalchemy import JSON, Column, DateTime, Index, Integer, String, Table, Text, UniqueConstraint
from sqlmodel import SQLModel

from pagemind.runtime.crypto.columns import EncryptedText

# -- API keys (`runtime.state.keys`, migration 0008) ------------------------------------------------------------

# A key of the daemon's API: only its SHA-256 is kept (the key itself is shown once, when made). `id` is its public
# name (listed, and accepted by `keys revoke`); `user_id` the end user a user key acts for (NULL for an admin key);
# `scope` "user" or "admin"; a revoked key keeps its row (`revoked_at`), so a listing shows when it stopped.
api_keys = Table(
    "api_keys",
    SQLModel.metadata,
    Column("id", String(32), primary_key=True),
    Column("key_hash", String(64), nullable=False, unique=True),
    Column("user_id", String(128), nullable=True),
    Column("scope", String(16), nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
    Column("revoked_at", DateTime(timezone=True), nullable=True),
    Index("ix_api_keys_user", "user_id"),
)


# -- erasure (`runtime.erasure`, migration 0009) ----------------------------------------------------------------------

# One row per agent being erased, written before anything of it is erased and deleted when nothing is left: an
# agent with a row here is invisible (every listing leaves it out; its name was changed in the same transaction),
# and the next process that opens the stores finishes its purge. `name`: its name when the purge began (its trace
# folder); `step`: `recorded`, then `erased` once its rows are gone (only the compaction is left); `counts`: what
# was erased so far, per store.
purges = Table(
    "purges",
    SQLModel.metadata,
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
    SQLModel.metadata,
    Column("agent_id", Integer, primary_key=True, autoincrement=False),
    Column("key", EncryptedText, nullable=False),  # base64, sealed under a data key: no guessing
)
pii_placeholders = Table(
    "pii_placeholders",
    SQLModel.metadata,
    Column("agent_id", Integer, primary_key=True, autoincrement=False),
    Column("kind", String(16), primary_key=True),
    Column("number", Integer, primary_key=True, autoincrement=False),
    Column("digest", String(64), nullable=False),
    UniqueConstraint("agent_id", "digest", name="uq_pii_placeholders_digest"),
)
pii_originals = Table(
    "pii_originals",
    SQLModel.metadata,
    Column("agent_id", Integer, primary_key=True, autoincrement=False),
    Column("kind", String(16), primary_key=True),
    Column("number", Integer, primary_key=True, autoincrement=False),
    Column("value", EncryptedText, nullable=False),
)

# -- encryption at rest (`runtime.state.encryption`, migration 0013) --------------------------------------------------

# The key-check record: which data key this database's text is sealed under (`role` "current"), and during a
# rotation the key it is moving to ("next"). `check` is a known text sealed under the key (a wrong key fails to open
# it: a clear error, never garbage); `index_key` the blind index's and the embedding cache's key, sealed under it
# (the same index key under every data key, so a rotation rebuilds no index). No row: encryption off.
data_keys = Table(
    "data_keys",
    SQLModel.metadata,
    Column("role", String(16), primary_key=True),
    Column("key_id", String(16), nullable=False),
    Column("check_value", Text, nullable=False),
    Column("index_key", Text, nullable=False),
    Column("created_at", DateTime(timezone=True), nullable=False),
)
