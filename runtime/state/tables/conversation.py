"""An agent's conversation log: `messages` (never deleted: also recall memory), `summaries` (every eviction's),
`steps` (each model call, with its timings and tokens) and `turn_keys` (idempotency keys). SQLModel rows, read and
written by `StateStore` (`state.conversation`)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import Column, Index, String
from sqlmodel import Field, SQLModel

from pagemind.runtime.crypto.columns import EncryptedJSON, EncryptedText
from pagemind.runtime.state.records import utcnow
from pagemind.runtime.state.tables.agents import AGENT_KEY


class SummaryRow(SQLModel, table=True):
    """Every recursive summary ever made, with the eviction that made it."""

    __tablename__ = "summaries"
    id: int | None = Field(default=None, primary_key=True)
    agent_id: int = Field(foreign_key=AGENT_KEY, index=True)
    text: str = Field(sa_column=Column(EncryptedText, nullable=False))
    evicted_count: int
    first_message_id: int | None = None
    last_message_id: int | None = None
    tokens_before: int
    tokens_after: int
    created_at: datetime = Field(default_factory=utcnow)


class MessageRow(SQLModel, table=True):
    """One message; never deleted (eviction only clears `in_context`), so this is also recall memory."""

    __tablename__ = "messages"
    __table_args__ = (Index("ix_messages_agent_context", "agent_id", "in_context", "id"),)
    id: int | None = Field(default=None, primary_key=True)
    agent_id: int = Field(foreign_key=AGENT_KEY)
    turn_id: str | None = None
    step_id: int | None = None
    role: str
    content: str | None = Field(default=None, sa_column=Column(EncryptedText, nullable=True))
    tool_calls: list[dict[str, Any]] | None = Field(default=None, sa_column=Column(EncryptedJSON, nullable=True))
    tool_call_id: str | None = None
    name: str | None = None
    is_error: bool = False
    in_context: bool = True
    created_at: datetime = Field(default_factory=utcnow)


class StepRow(SQLModel, table=True):
    """One model call of a turn, with its timings and token counts."""

    __tablename__ = "steps"
    id: int | None = Field(default=None, primary_key=True)
    agent_id: int = Field(foreign_key=AGENT_KEY, index=True)
    turn_id: str
    step_index: int
    model: str
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    stop_reason: str | None = None
    started_at: datetime
    model_ms: float
    total_ms: float
    cached_tokens: int | None = None  # migration 0010: the provider's prompt-cache hits, of prompt_tokens


class TurnKeyRow(SQLModel, table=True):
    """An idempotency key of a turn: stored with the turn's user message, in one transaction (migration 0003)."""

    __tablename__ = "turn_keys"
    agent_id: int = Field(foreign_key=AGENT_KEY, primary_key=True)
    key: str = Field(sa_column=Column(String(200), primary_key=True))
    turn_id: str = Field(sa_column=Column(String(64), nullable=False))
    created_at: datetime = Field(default_factory=utcnow)
