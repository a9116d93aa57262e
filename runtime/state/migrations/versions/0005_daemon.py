"""The daemon's tables: the durable inbox, agent leases, agent origins (templates), trigger fires, daemons.

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-30

- `inbox`: every accepted message or job, pending → running (owner, lease) → done | failed, in arrival order;
  (agent_id, idempotency_key) unique.
- `agent_leases`: the daemon process that runs an agent's work now, until when.
- `agent_origins`: the template an API-made agent follows, and the block values it was made with.
- `trigger_fires`: when each trigger of an agent last fired.
- `daemons`: the processes serving this database, and their URLs.
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision: str = '0005'
down_revision: Union[str, Sequence[str], None] = '0004'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    """Create the five tables."""
    op.create_table('agent_leases',
    sa.Column('agent_id', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('owner', sa.String(length=64), nullable=False),
    sa.Column('expires_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('agent_id')
    )
    op.create_table('agent_origins',
    sa.Column('agent_id', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('template', sa.String(length=128), nullable=True),
    sa.Column('blocks', sa.JSON(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('agent_id')
    )
    op.create_table('daemons',
    sa.Column('id', sa.String(length=64), nullable=False),
    sa.Column('url', sa.String(length=512), nullable=False),
    sa.Column('pid', sa.Integer(), nullable=False),
    sa.Column('host', sa.String(length=255), nullable=False),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('heartbeat_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('id')
    )
    op.create_table('inbox',
    sa.Column('id', sa.BigInteger().with_variant(sa.Integer(), 'sqlite'), autoincrement=True, nullable=False),
    sa.Column('run_id', sa.String(length=32), nullable=False),
    sa.Column('agent_id', sa.Integer(), nullable=False),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('content', sa.Text(), nullable=False),
    sa.Column('idempotency_key', sa.String(length=200), nullable=True),
    sa.Column('state', sa.String(length=16), nullable=False),
    sa.Column('owner', sa.String(length=64), nullable=True),
    sa.Column('lease_expires_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('attempts', sa.Integer(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('started_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('finished_at', sa.DateTime(timezone=True), nullable=True),
    sa.Column('result', sa.JSON(), nullable=True),
    sa.Column('error', sa.Text(), nullable=True),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('agent_id', 'idempotency_key', name='uq_inbox_agent_key'),
    sa.UniqueConstraint('run_id')
    )
    with op.batch_alter_table('inbox', schema=None) as batch_op:
        batch_op.create_index('ix_inbox_agent_state', ['agent_id', 'state', 'id'], unique=False)
        batch_op.create_index('ix_inbox_state', ['state', 'id'], unique=False)

    op.create_table('trigger_fires',
    sa.Column('agent_id', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('trigger_key', sa.String(length=200), nullable=False),
    sa.Column('fired_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('agent_id', 'trigger_key')
    )


def downgrade() -> None:
    """Drop them."""
    op.drop_table('trigger_fires')
    with op.batch_alter_table('inbox', schema=None) as batch_op:
        batch_op.drop_index('ix_inbox_state')
        batch_op.drop_index('ix_inbox_agent_state')

    op.drop_table('inbox')
    op.drop_table('daemons')
    op.drop_table('agent_origins')
    op.drop_table('agent_leases')
