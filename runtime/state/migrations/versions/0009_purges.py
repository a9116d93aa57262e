"""Erasure: the purges in progress.

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-07

- `purges`: one row per agent being erased (`runtime.erasure`), written before anything is erased and deleted
  once nothing of the agent is left: the agent's id, its name when the purge began (its trace folder's name), the
  step reached (`recorded`, `erased`: its rows are gone and only the compaction is left), how many times the purge
  was started, and the counts so far (per store, JSON). An agent with a row here is invisible to every listing.
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision: str = '0009'
down_revision: Union[str, Sequence[str], None] = '0008'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    """Create the table."""
    op.create_table('purges',
    sa.Column('agent_id', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('name', sa.String(length=255), nullable=False),
    sa.Column('step', sa.String(length=16), nullable=False),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('counts', sa.JSON(), nullable=False),
    sa.Column('requested_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('agent_id'),
    )


def downgrade() -> None:
    """Drop it."""
    op.drop_table('purges')
