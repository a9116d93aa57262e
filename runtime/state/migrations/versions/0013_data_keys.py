"""Encryption at rest: the key-check record.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-07

- `data_keys`: the data key this database's text is sealed under (`role` current) and, during a rotation, the one
  it moves to (next): its id, a known text sealed under it (the key check), and the blind index's key sealed under
  it (`runtime.state.encryption`). No row: encryption off, as before. The text columns keep their types: a sealed
  value is text (`pmenc1:…`), so nothing else changes.
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision: str = '0013'
down_revision: Union[str, Sequence[str], None] = '0012'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    """Create the table."""
    op.create_table('data_keys',
    sa.Column('role', sa.String(length=16), nullable=False),
    sa.Column('key_id', sa.String(length=16), nullable=False),
    sa.Column('check_value', sa.Text(), nullable=False),
    sa.Column('index_key', sa.Text(), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.PrimaryKeyConstraint('role'),
    )


def downgrade() -> None:
    """Drop it."""
    op.drop_table('data_keys')
