"""Prompt-cache use: the provider's cached prompt tokens per step.

Revision ID: 0010
Revises: 0009
Create Date: 2026-12-07

- `steps.cached_tokens`: of the step's `prompt_tokens`, how many the provider said it read from its prompt cache
  (`usage.prompt_tokens_details.cached_tokens`, or `cache_read_input_tokens` through a gateway); NULL where it did
  not say, and for every step stored before this revision.
"""
from typing import Sequence, Union

from alembic import op
import sqlalchemy as sa


# revision identifiers, used by Alembic.
revision: str = '0010'
down_revision: Union[str, Sequence[str], None] = '0009'
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None


def upgrade() -> None:
    """Add the column."""
    with op.batch_alter_table('steps') as batch:
        batch.add_column(sa.Column('cached_tokens', sa.Integer(), nullable=True))


def downgrade() -> None:
    """Drop it."""
    with op.batch_alter_table('steps') as batch:
        batch.drop_column('cached_tokens')
