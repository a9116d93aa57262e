"""Privacy: redaction's numbering per agent, and the store of originals.

Revision ID: 0011
Revises: 0010
Create Date: 2026-12-07

- `pii_keys`: one random HMAC key per agent (`runtime.privacy`).
- `pii_placeholders`: per agent, kind and number, the keyed hash of the value a placeholder (`[phone#1]`) stands
  for; never the value.
- `pii_originals`: the original behind a placeholder, for `privacy.keep_originals` (which requires encryption at
  rest: `value` is sealed, as `pii_keys.key` is, so the keyed hashes cannot be tested against guesses).
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision: str = '0011'
down_revision: Union[str, Sequence[str], None] = '0010'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    """Create the tables."""
    op.create_table('pii_keys',
    sa.Column('agent_id', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('key', sa.Text(), nullable=False),
    sa.PrimaryKeyConstraint('agent_id'),
    )
    op.create_table('pii_placeholders',
    sa.Column('agent_id', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('number', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('digest', sa.String(length=64), nullable=False),
    sa.PrimaryKeyConstraint('agent_id', 'kind', 'number'),
    sa.UniqueConstraint('agent_id', 'digest', name='uq_pii_placeholders_digest'),
    )
    op.create_table('pii_originals',
    sa.Column('agent_id', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('kind', sa.String(length=16), nullable=False),
    sa.Column('number', sa.Integer(), autoincrement=False, nullable=False),
    sa.Column('value', sa.Text(), nullable=False),
    sa.PrimaryKeyConstraint('agent_id', 'kind', 'number'),
    )


def downgrade() -> None:
    """Drop them."""
    op.drop_table('pii_originals')
    op.drop_table('pii_placeholders')
    op.drop_table('pii_keys')
