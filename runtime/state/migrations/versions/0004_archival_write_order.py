"""Archival write order: SQL and the vector store agree after any crash, and counts are never stale.

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-30

- `archival_memories` gets `state` ('inserting' | 'live'; every existing row is live), `write_token`,
  `write_started` and `supersedes`: a memory's row is written before its vector-store point and marked live after
  it, and the service reconciles what a crash left half-done when it opens the store (`memory.ledger`,
  `memory.reconcile`).
- `archival_revisions`: one counter per agent, moved by every change to what its memory statistics show, so a
  cached count is checked with one primary-key read (`ArchivalService.stats`). No row reads as revision 0.
- `database_identity`: one row, a new UUID: the `origin` every vector-store point written from now on carries.
"""
import uuid
from datetime import datetime, timezone
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "0004"
down_revision: Union[str, Sequence[str], None] = "0003"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    """Add the write-order columns (existing memories are live), the per-agent revision counter and the
    database's identity."""
    identity = op.create_table("database_identity",
                               sa.Column("id", sa.String(length=36), nullable=False),
                               sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
                               sa.PrimaryKeyConstraint("id"))
    op.bulk_insert(identity, [{"id": str(uuid.uuid4()), "created_at": datetime.now(timezone.utc)}])
    op.create_table("archival_revisions",
                    sa.Column("agent_id", sa.Integer(), autoincrement=False, nullable=False),
                    sa.Column("revision", sa.BigInteger(), nullable=False),
                    sa.PrimaryKeyConstraint("agent_id"))
    with op.batch_alter_table("archival_memories") as batch:
        batch.add_column(sa.Column("state", sa.String(length=16), server_default="live", nullable=False))
        batch.add_column(sa.Column("write_token", sa.String(length=32), nullable=True))
        batch.add_column(sa.Column("write_started", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("supersedes", sa.String(length=36), nullable=True))


def downgrade() -> None:
    """Drop them again (rows still 'inserting' are dropped with their state: their points are orphans that the
    previous version never removes, but never lists either)."""
    op.execute("DELETE FROM archival_memories WHERE state <> 'live'")
    with op.batch_alter_table("archival_memories") as batch:
        batch.drop_column("supersedes")
        batch.drop_column("write_started")
        batch.drop_column("write_token")
        batch.drop_column("state")
    op.drop_table("archival_revisions")
    op.drop_table("database_identity")
