"""API keys and agent owners.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-07

- `api_keys`: a key of the daemon's API, by its SHA-256 only (the key itself is shown once): its public id, the
  end user it acts for (NULL: an admin key), its scope, when made and when revoked (`runtime.state.keys`).
- `agents.owner`: the end user an agent belongs to (NULL: nobody's, reached by admin keys only), indexed.

Self-contained: it names no pagemind module, so it can be renumbered at a merge.
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision: str = '0008'
down_revision: Union[str, Sequence[str], None] = '0007'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    """Create the keys table and the owner column."""
    op.create_table('api_keys',
    sa.Column('id', sa.String(length=32), nullable=False),
    sa.Column('key_hash', sa.String(length=64), nullable=False),
    sa.Column('user_id', sa.String(length=128), nullable=True),
    sa.Column('scope', sa.String(length=16), nullable=False),
    sa.Column('created_at', sa.DateTime(timezone=True), nullable=False),
    sa.Column('revoked_at', sa.DateTime(timezone=True), nullable=True),
    sa.PrimaryKeyConstraint('id'),
    sa.UniqueConstraint('key_hash')
    )
    with op.batch_alter_table('api_keys', schema=None) as batch_op:
        batch_op.create_index('ix_api_keys_user', ['user_id'], unique=False)

    with op.batch_alter_table('agents', schema=None) as batch_op:
        batch_op.add_column(sa.Column('owner', sa.String(length=128), nullable=True))
        batch_op.create_index(batch_op.f('ix_agents_owner'), ['owner'], unique=False)



def downgrade() -> None:
    """Drop them."""
    with op.batch_alter_table('agents', schema=None) as batch_op:
        batch_op.drop_index(batch_op.f('ix_agents_owner'))
        batch_op.drop_column('owner')

    with op.batch_alter_table('api_keys', schema=None) as batch_op:
        batch_op.drop_index('ix_api_keys_user')

    op.drop_table('api_keys')
