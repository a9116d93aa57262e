"""One turn at a time: a version on every block (optimistic check of block writes) and turn idempotency keys.

Revision ID: 0003
Revises: 0002
Create Date: 2026-11-30

- `blocks.version`: incremented by every edit; a step's commit updates a block only where the version is the one
  the agent read, so a lost update becomes an error (the per-agent turn lock makes it never happen).
- `turn_keys`: (agent id, idempotency key) → the turn that key started, written with the turn's user message.
"""
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "0003"
down_revision: Union[str, Sequence[str], None] = "0002"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    """Add `blocks.version` (0 for existing blocks) and the `turn_keys` table."""
    with op.batch_alter_table("blocks") as batch:
        batch.add_column(sa.Column("version", sa.Integer(), nullable=False, server_default="0"))
    op.create_table("turn_keys",
                    sa.Column("agent_id", sa.Integer(), nullable=False),
                    sa.Column("key", sa.String(length=200), nullable=False),
                    sa.Column("turn_id", sa.String(length=64), nullable=False),
                    sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
                    sa.ForeignKeyConstraint(["agent_id"], ["agents.id"]),
                    sa.PrimaryKeyConstraint("agent_id", "key"))


def downgrade() -> None:
    """Drop the keys and the block versions."""
    op.drop_table("turn_keys")
    with op.batch_alter_table("blocks") as batch:
        batch.drop_column("version")
