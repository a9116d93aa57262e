"""Relaying a run's events between daemon processes.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-30

- `run_events`: a run's events (run id, seq, when written, the event's trace line as JSON text), written by the
  daemon that runs it while a daemon in another process watches the run (`scheduler.streams.relay`); UNLOGGED on
  Postgres (emptied by a server crash, which costs only streams in flight their events).
- `inbox.watcher`: who watches the run's events (a daemon id, "*" for several, NULL for none).
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision: str = '0007'
down_revision: Union[str, Sequence[str], None] = '0006'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    """Create the table and add the column."""
    op.create_table('run_events',
    sa.Column('run_id', sa.String(length=32), nullable=False),
    sa.Column('seq', sa.BigInteger(), autoincrement=False, nullable=False),
    sa.Column('at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('event', sa.Text(), nullable=False),
    sa.PrimaryKeyConstraint('run_id', 'seq'),
    # Unlogged on Postgres: its rows live minutes and are worth nothing after a server crash, and a write to it
    # commits without waiting for the WAL flush (0.3 ms instead of 3 ms a batch here: bench/relay_cost.py).
    prefixes=['UNLOGGED'] if op.get_bind().dialect.name == 'postgresql' else [],
    )
    with op.batch_alter_table('run_events', schema=None) as batch_op:
        batch_op.create_index('ix_run_events_at', ['at'], unique=False)
    with op.batch_alter_table('inbox', schema=None) as batch_op:
        batch_op.add_column(sa.Column('watcher', sa.String(length=64), nullable=True))


def downgrade() -> None:
    """Drop them."""
    with op.batch_alter_table('inbox', schema=None) as batch_op:
        batch_op.drop_column('watcher')
    with op.batch_alter_table('run_events', schema=None) as batch_op:
        batch_op.drop_index('ix_run_events_at')
    op.drop_table('run_events')
