"""The agent and its core memory: `agents` (name, last spec, window state), `blocks` (each block's current value)
and `block_versions` (every edit of a block). SQLModel rows, read and written by `StateStore`."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Column, Integer, String, UniqueConstraint
from sqlmodel import Field, SQLModel

from pagemind.runtime.crypto.columns import EncryptedText
from pagemind.runtime.state.records import utcnow

# What every `agent_id` foreign key names: a table module that imports it has `agents` registered beside it.
AGENT_KEY = "agents.id"


class AgentRow(SQLModel, table=True):
    """An agent: its name (unique, changeable with `StateStore.rename_agent`), its last spec and window state."""

    __tablename__ = "agents"
    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(index=True, unique=True)
    spec_hash: str
    spec_json: str = Field(sa_column=Column(EncryptedText, nullable=False))
    summary: str = Field(default="", sa_column=Column(EncryptedText, nullable=False, default=""))
    pressure_warned: bool = False
    token_correction: float = 1.0
    created_at: datetime = Field(default_factory=utcnow)
    updated_at: datetime = Field(default_factory=utcnow)
    # The end user it belongs to (migration 0008): a user key of the API reaches only the agents it owns; NULL for
    # an agent of nobody's (only admin keys reach it). Written by `state.keys` alone.
    owner: str | None = Field(default=None, sa_column=Column(String(128), nullable=True, index=True))


class BlockRow(SQLModel, table=True):
    """A core-memory block's current value."""

    __tablename__ = "blocks"
    __table_args__ = (UniqueConstraint("agent_id", "label"),)
    id: int | None = Field(default=None, primary_key=True)
    agent_id: int = Field(foreign_key=AGENT_KEY, index=True)
    label: str
    value: str = Field(sa_column=Column(EncryptedText, nullable=False))
    char_limit: int
    description: str = ""
    read_only: bool = False
    updated_at: datetime = Field(default_factory=utcnow)
    # Incremented by every edit; a step's commit writes a block only at the version its process read (migration
    # 0003), so a write computed from a stale value fails instead of silently losing another process's edit.
    version: int = Field(default=0, sa_column=Column(Integer, nullable=False, server_default="0"))


class BlockVersionRow(SQLModel, table=True):
    """One edit of a block (by a tool call, or a reset from the YAML)."""

    __tablename__ = "block_versions"
    id: int | None = Field(default=None, primary_key=True)
    agent_id: int = Field(foreign_key=AGENT_KEY, index=True)
    label: str
    step_id: int | None = None
    operation: str
    old_value: str = Field(sa_column=Column(EncryptedText, nullable=False))
    new_value: str = Field(sa_column=Column(EncryptedText, nullable=False))
    created_at: datetime = Field(default_factory=utcnow)
