"""Baseline: the schema as pagemind 0.1.0 (commit 1d24805) created it, before migrations existed.

Revision ID: 0001
Revises:
Create Date: 2026-11-30

That release created its tables lazily (`create_all`, each memory module its own on first use, raw DDL for the
recall index) and added late columns with hand-written ALTERs. So this revision also ADOPTS such a database: it
creates only the tables and indexes that are missing and adds the columns that releases before 0.1.0 lacked, then
stamps the database at 0001. On a fresh database it simply creates everything.
"""
from typing import Sequence, Union

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "0001"
down_revision: Union[str, Sequence[str], None] = None
branch_labels: Union[str, Sequence[str], None] = None
depends_on: Union[str, Sequence[str], None] = None

STAMP = sa.DateTime(timezone=True)


def _tables() -> dict[str, tuple[list[sa.schema.SchemaItem], list[tuple[str, list[str], bool]]]]:
    """Each table: (columns and constraints, indexes as (name, columns, unique))."""
    return {
        "agents": ([
            sa.Column("id", sa.Integer(), nullable=False),
            sa.Column("name", sa.String(), nullable=False),
            sa.Column("spec_hash", sa.String(), nullable=False),
            sa.Column("spec_json", sa.Text(), nullable=False),
            sa.Column("summary", sa.Text(), nullable=False),
            sa.Column("pressure_warned", sa.Boolean(), nullable=False),
            sa.Column("token_correction", sa.Float(), nullable=False),
            sa.Column("created_at", STAMP, nullable=False),
            sa.Column("updated_at", STAMP, nullable=False),
            sa.PrimaryKeyConstraint("id"),
        ], [("ix_agents_name", ["name"], True)]),
        "archival_memories": ([
            sa.Column("id", sa.String(length=36), nullable=False),
            sa.Column("agent_id", sa.String(length=128), nullable=False),
            sa.Column("user_id", sa.String(length=128), nullable=True),
            sa.Column("text", sa.Text(), nullable=False),
            sa.Column("kind", sa.String(length=32), nullable=False),
            sa.Column("importance", sa.Float(), nullable=False),
            sa.Column("tags", sa.JSON(), nullable=False),
            sa.Column("created_at", STAMP, nullable=False),
            sa.Column("updated_at", STAMP, nullable=False),
            sa.Column("last_hit_at", STAMP, nullable=True),
            sa.Column("hit_count", sa.Integer(), nullable=False),
            sa.Column("source_message_ids", sa.JSON(), nullable=False),
            sa.Column("expires_at", STAMP, nullable=True),
            sa.Column("superseded_by", sa.String(length=36), nullable=True),
            sa.PrimaryKeyConstraint("id"),
        ], [("ix_archival_memories_agent_id", ["agent_id"], False)]),
        "archival_memory_versions": ([
            sa.Column("id", sa.Integer(), autoincrement=True, nullable=False),
            sa.Column("agent_id", sa.String(length=128), nullable=False),
            sa.Column("memory_id", sa.String(length=36), nullable=False),
            sa.Column("operation", sa.String(length=32), nullable=False),
            sa.Column("text", sa.Text(), nullable=False),
            sa.Column("detail", sa.JSON(), nullable=False),
            sa.Column("at", STAMP, nullable=False),
            sa.PrimaryKeyConstraint("id"),
        ], [("ix_archival_memory_versions_agent_id", ["agent_id"], False),
            ("ix_archival_memory_versions_memory_id", ["memory_id"], False)]),
        "embedding_cache": ([
            sa.Column("model", sa.String(length=128), nullable=False),
            sa.Column("text_hash", sa.String(length=64), nullable=False),
            sa.Column("dim", sa.Integer(), nullable=False),
            sa.Column("vector", sa.LargeBinary(), nullable=False),
            sa.PrimaryKeyConstraint("model", "text_hash"),
        ], []),
        "block_versions": ([
            sa.Column("id", sa.Integer(), nullable=False),
            sa.Column("agent_id", sa.Integer(), nullable=False),
            sa.Column("label", sa.String(), nullable=False),
            sa.Column("step_id", sa.Integer(), nullable=True),
            sa.Column("operation", sa.String(), nullable=False),
            sa.Column("old_value", sa.Text(), nullable=False),
            sa.Column("new_value", sa.Text(), nullable=False),
            sa.Column("created_at", STAMP, nullable=False),
            sa.ForeignKeyConstraint(["agent_id"], ["agents.id"]),
            sa.PrimaryKeyConstraint("id"),
        ], [("ix_block_versions_agent_id", ["agent_id"], False)]),
        "blocks": ([
            sa.Column("id", sa.Integer(), nullable=False),
            sa.Column("agent_id", sa.Integer(), nullable=False),
            sa.Column("label", sa.String(), nullable=False),
            sa.Column("value", sa.Text(), nullable=False),
            sa.Column("char_limit", sa.Integer(), nullable=False),
            sa.Column("description", sa.String(), nullable=False),
            sa.Column("read_only", sa.Boolean(), nullable=False),
            sa.Column("updated_at", STAMP, nullable=False),
            sa.ForeignKeyConstraint(["agent_id"], ["agents.id"]),
            sa.PrimaryKeyConstraint("id"),
            sa.UniqueConstraint("agent_id", "label"),
        ], [("ix_blocks_agent_id", ["agent_id"], False)]),
        "messages": ([
            sa.Column("id", sa.Integer(), nullable=False),
            sa.Column("agent_id", sa.Integer(), nullable=False),
            sa.Column("turn_id", sa.String(), nullable=True),
            sa.Column("step_id", sa.Integer(), nullable=True),
            sa.Column("role", sa.String(), nullable=False),
            sa.Column("content", sa.Text(), nullable=True),
            sa.Column("tool_calls", sa.JSON(), nullable=True),
            sa.Column("tool_call_id", sa.String(), nullable=True),
            sa.Column("name", sa.String(), nullable=True),
            sa.Column("is_error", sa.Boolean(), nullable=False),
            sa.Column("in_context", sa.Boolean(), nullable=False),
            sa.Column("created_at", STAMP, nullable=False),
            sa.ForeignKeyConstraint(["agent_id"], ["agents.id"]),
            sa.PrimaryKeyConstraint("id"),
        ], [("ix_messages_agent_context", ["agent_id", "in_context", "id"], False)]),
        "steps": ([
            sa.Column("id", sa.Integer(), nullable=False),
            sa.Column("agent_id", sa.Integer(), nullable=False),
            sa.Column("turn_id", sa.String(), nullable=False),
            sa.Column("step_index", sa.Integer(), nullable=False),
            sa.Column("model", sa.String(), nullable=False),
            sa.Column("prompt_tokens", sa.Integer(), nullable=True),
            sa.Column("completion_tokens", sa.Integer(), nullable=True),
            sa.Column("stop_reason", sa.String(), nullable=True),
            sa.Column("started_at", STAMP, nullable=False),
            sa.Column("model_ms", sa.Float(), nullable=False),
            sa.Column("total_ms", sa.Float(), nullable=False),
            sa.ForeignKeyConstraint(["agent_id"], ["agents.id"]),
            sa.PrimaryKeyConstraint("id"),
        ], [("ix_steps_agent_id", ["agent_id"], False)]),
        "summaries": ([
            sa.Column("id", sa.Integer(), nullable=False),
            sa.Column("agent_id", sa.Integer(), nullable=False),
            sa.Column("text", sa.Text(), nullable=False),
            sa.Column("evicted_count", sa.Integer(), nullable=False),
            sa.Column("first_message_id", sa.Integer(), nullable=True),
            sa.Column("last_message_id", sa.Integer(), nullable=True),
            sa.Column("tokens_before", sa.Integer(), nullable=False),
            sa.Column("tokens_after", sa.Integer(), nullable=False),
            sa.Column("created_at", STAMP, nullable=False),
            sa.ForeignKeyConstraint(["agent_id"], ["agents.id"]),
            sa.PrimaryKeyConstraint("id"),
        ], [("ix_summaries_agent_id", ["agent_id"], False)]),
    }


# Columns that releases before 0.1.0 lacked (its `_add_missing_columns` added them with these defaults).
LATE_COLUMNS = {
    "agents": [sa.Column("pressure_warned", sa.Boolean(), nullable=False, server_default=sa.false()),
               sa.Column("token_correction", sa.Float(), nullable=False, server_default="1.0")],
}

RECALL_SQLITE = [
    "CREATE VIRTUAL TABLE IF NOT EXISTS recall_fts USING fts5(keyed, own, tokenize='unicode61 remove_diacritics 2')",
]
RECALL_POSTGRES = [
    "CREATE TABLE IF NOT EXISTS recall_fts (message_id BIGINT PRIMARY KEY, agent_id INTEGER NOT NULL, "
    "tsv TSVECTOR NOT NULL)",
    "CREATE INDEX IF NOT EXISTS ix_recall_fts_tsv ON recall_fts USING GIN (tsv)",
    "CREATE INDEX IF NOT EXISTS ix_recall_fts_agent ON recall_fts (agent_id)",
]
RECALL_WATERMARKS = ("CREATE TABLE IF NOT EXISTS recall_watermarks (agent_id INTEGER PRIMARY KEY, "
                     "message_id BIGINT NOT NULL)")


def upgrade() -> None:
    """Create what is missing of the 0.1.0 schema (everything, on a fresh database)."""
    bind = op.get_bind()
    inspector = sa.inspect(bind)
    present = set(inspector.get_table_names())
    for name, (columns, indexes) in _tables().items():
        if name not in present:
            op.create_table(name, *columns)
            known: set[str | None] = set()
        else:
            known = {i["name"] for i in inspector.get_indexes(name)}
            have = {c["name"] for c in inspector.get_columns(name)}
            missing = [c for c in LATE_COLUMNS.get(name, []) if c.name not in have]
            if missing:
                with op.batch_alter_table(name) as batch:
                    for column in missing:
                        batch.add_column(column)
        for index, columns_of, unique in indexes:
            if index not in known:
                op.create_index(index, name, columns_of, unique=unique)
    for statement in RECALL_POSTGRES if bind.dialect.name == "postgresql" else RECALL_SQLITE:
        op.execute(statement)
    op.execute(RECALL_WATERMARKS)


def downgrade() -> None:
    """Drop every table (the whole schema: there is nothing before the baseline)."""
    op.execute("DROP TABLE IF EXISTS recall_watermarks")
    op.execute("DROP TABLE IF EXISTS recall_fts")
    for name in reversed(list(_tables())):
        op.drop_table(name)
