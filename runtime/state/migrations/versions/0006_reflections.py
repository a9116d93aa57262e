"""Reflection's bookkeeping: one row per reflection of an agent.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-30

- `reflections`: id, agent, started/finished, the newest message covered, status (running | applying | done |
  invalid | failed), counts of changes, the validated plan while it is applied, the error if any.
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision: str = '0006'
down_revision: Union[str, Sequence[str], None] = '0005'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    """Create the table."""
    op.create_table('reflections',
    sa.Column('id', sa.String(length=36), nullable=False),
    sa.Column('agent_id', sa.Integer(), nullable=False),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('last_message_id', sa.BigInteger(), nullable=False),
    sa.Column('status', sa.String(length=16), nullable=False),
    sa.Column('counts', sa.JSON(), nullable=False),
    sa.Column('plan', sa.JSON(), nullable=True),
    sa.Column('error', sa.Text(), nullable=True),
    sa.PrimaryKeyConstraint('id')
    )
    with op.batch_alter_table('reflections', schema=None) as batch_op:
        batch_op.create_index('ix_reflections_agent', ['agent_id', 'started_at'], unique=False)


def downgrade() -> None:
    """Drop it."""
    with op.batch_alter_table('reflections', schema=None) as batch_op:
        batch_op.drop_index('ix_reflections_agent')
    op.drop_table('reflections')
