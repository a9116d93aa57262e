"""Forget and mute by request, and human review: the topics an agent must not bring up, the memories waiting for review.

Revision ID: 0012
Revises: 0011
Create Date: 2026-12-07

- `muted_topics`: one row per topic the user asked an agent not to bring up (`runtime.memory.topics`), until it is
  unmuted: the agent's id, the topic as the user or the model wrote it, and when it was muted. A muted topic is
  filtered out of prefetch, archival and recall search results, extraction and reflection.
- `memory_reviews`: memories held for a person's review (`memory.review: required`, `runtime.memory.review`): what
  would have been stored (text, kind, importance, tags, the messages it was filed from), who proposed it (`origin`:
  extraction, reflection, archival_memory_insert), the memory it would supersede once approved; a row goes when
  it is approved (the memory is then written) or rejected.
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision: str = '0012'
down_revision: Union[str, Sequence[str], None] = '0011'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    """Create the tables."""
    op.create_table('muted_topics',
    sa.Column('agent_id', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('topic', sa.String(length=200), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('agent_id', 'topic'),
    )
    op.create_table('memory_reviews',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('agent_id', sa.Integer(), nullable=False),
    sa.Column('origin', sa.String(length=32), nullable=False),
    sa.Column('text', sa.Text(), nullable=False),
    sa.Column('kind', sa.String(length=32), nullable=False),
    sa.Column('importance', sa.Float(), nullable=True),
    sa.Column('tags', sa.JSON(), nullable=False),
    sa.Column('source_message_ids', sa.JSON(), nullable=False),
    sa.Column('supersedes', sa.String(length=36), nullable=True),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id'),
    )
    op.create_index(op.f('ix_memory_reviews_agent_id'), 'memory_reviews', ['agent_id'], unique=False)


def downgrade() -> None:
    """Drop them."""
    op.drop_index(op.f('ix_memory_reviews_agent_id'), table_name='memory_reviews')
    op.drop_table('memory_reviews')
    op.drop_table('muted_topics')
