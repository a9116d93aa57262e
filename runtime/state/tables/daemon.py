"""The daemon's tables (`scheduler`, migrations 0005 and 0007): `inbox` (every accepted message and job, with its
state and lease), `agent_leases` (which daemon process runs an agent's work now), `agent_origins` (the template an
agent was made from), `trigger_fires` (when each schedule last fired), `daemons` (the processes serving) and
`run_events` (a run's events relayed to watchers in other daemon processes)."""

from __future__ import annotations

from sqlalchemy import JSON, BigInteger, Column, DateTime, Index, Integer, String, Table, Text, UniqueConstraint
from sqlmodel import SQLModel

from pagemind.runtime.crypto.columns import EncryptedJSON, EncryptedText

# Every accepted piece of work for an agent: a user's message, a trigger's message, a maintenance job. It is
# committed before the API answers. pending → running (owner, lease_expires_at) → done | failed; `id` is the
# arrival order, and an agent's work runs in that order, one item at a time. (agent_id, idempotency_key) is
# unique, so a retried submission finds the first one.
inbox = Table(
    "inbox",
    SQLModel.metadata,
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
    SQLModel.metadata,
    Column("agent_id", Integer, primary_key=True, autoincrement=False),
    Column("owner", String(64), nullable=False),
    Column("expires_at", DateTime(timezone=True), nullable=False),
)

# An agent made through the API from a template: its spec is the template's (renamed), read again on each turn,
# so a change to the template reaches it; `blocks` holds the initial values given at creation.
agent_origins = Table(
    "agent_origins",
    SQLModel.metadata,
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
    SQLModel.metadata,
    Column("agent_id", Integer, primary_key=True, autoincrement=False),
    Column("trigger_key", String(200), primary_key=True),
    Column("fired_at", DateTime(timezone=True), nullable=False),
)

# The daemon processes serving this database, with the URL they answer on: `pagemind run` sends through a live
# one instead of fighting it for the stores.
daemons = Table(
    "daemons",
    SQLModel.metadata,
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
    SQLModel.metadata,
    Column("run_id", String(32), primary_key=True),
    Column("seq", BigInteger, primary_key=True, autoincrement=False),
    Column("at", DateTime(timezone=True), nullable=False),
    Column("event", EncryptedText, nullable=False),
    Index("ix_run_events_at", "at"),
)
