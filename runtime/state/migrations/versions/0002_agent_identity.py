"""One agent identity: archival memory keyed by the agent's id (it was keyed by its name).

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-30

- Memories whose name has no `agents` row (an archival service used on its own) get an agent of that name, with
  an empty spec (`spec_hash` ''), so nothing is orphaned; running a YAML of that name later adopts it.
- `archival_memories.agent_id` and `archival_memory_versions.agent_id` become integers holding `agents.id`.
- `recall_watermarks.agent_id` is declared NOT NULL on SQLite too (it was a rowid alias without the constraint).
- The vector store cannot be changed from here: `archival_rekeys` records every agent's old key (its name) and
  id, and the archival service re-keys a store's points the first time it opens that store (`memory.rekey`,
  idempotent), then notes the store in `archival_rekeyed_stores`.

One-way: the re-keyed vector-store points cannot be taken back from SQL, so there is no downgrade.
"""
from datetime import datetime, timezone
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "0002"
down_revision: Union[str, Sequence[str], None] = "0001"
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

ARCHIVAL = ("archival_memories", "archival_memory_versions")


def upgrade() -> None:
    """Adopt orphan keys as agents, record the re-keying, and turn the archival key columns into agent ids."""
    now = datetime.now(timezone.utc)
    keys = " UNION ".join(f"SELECT agent_id AS k FROM {table}" for table in ARCHIVAL)
    op.get_bind().execute(sa.text(
        "INSERT INTO agents (name, spec_hash, spec_json, summary, pressure_warned, token_correction, created_at, "
        f"updated_at) SELECT k, '', '{{}}', '', :no, 1.0, :now, :now FROM ({keys}) AS keys "
        "WHERE k NOT IN (SELECT name FROM agents)"), {"no": False, "now": now})
    op.create_table("archival_rekeys",
                    sa.Column("old_key", sa.String(length=128), nullable=False),
                    sa.Column("agent_id", sa.Integer(), nullable=False),
                    sa.PrimaryKeyConstraint("old_key"))
    op.create_table("archival_rekeyed_stores",
                    sa.Column("store", sa.String(length=512), nullable=False),
                    sa.Column("at", sa.DateTime(timezone=True), nullable=False),
                    sa.PrimaryKeyConstraint("store"))
    op.execute("INSERT INTO archival_rekeys (old_key, agent_id) SELECT name, id FROM agents")
    for table in ARCHIVAL:
        op.execute(f"UPDATE {table} SET agent_id = (SELECT CAST(agents.id AS VARCHAR(128)) FROM agents "
                   f"WHERE agents.name = {table}.agent_id)")
        with op.batch_alter_table(table) as batch:
            batch.alter_column("agent_id", existing_type=sa.String(length=128), type_=sa.Integer(),
                               existing_nullable=False, postgresql_using="agent_id::integer")
    # The recall watermark's key is an agent id too; 0.1.0's raw DDL left it without NOT NULL on SQLite (a rowid
    # alias, never null in practice). Declared NOT NULL, the schema reads the same on both databases.
    with op.batch_alter_table("recall_watermarks") as batch:
        batch.alter_column("agent_id", existing_type=sa.Integer(), nullable=False)


def downgrade() -> None:
    """Refused: vector-store points were re-keyed by id and cannot be re-keyed back from here."""
    raise NotImplementedError("revision 0002 is one-way (archival points in the vector store are keyed by id)")
