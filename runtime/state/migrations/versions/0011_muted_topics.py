"""Forget and mute by request: the topics an agent must not bring up.

Revision ID: 0011
Revises: 0009
Create Date: 2026-12-07

- `muted_topics`: one row per topic the user asked an agent not to bring up (`runtime.memory.topics`), until it is
  unmuted: the agent's id, the topic as the user or the model wrote it, and when it was muted. A muted topic is
  filtered out of prefetch, archival and recall search results, extraction and reflection.
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision: str = '0011'
down_revision: Union[str, Sequence[str], None] = '0009'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    """Create the table."""
    op.create_table('muted_topics',
    sa.Column('agent_id', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('topic', sa.String(length=200), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('agent_id', 'topic'),
    )


def downgrade() -> None:
    """Drop it."""
    op.drop_table('muted_topics')
