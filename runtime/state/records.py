"""What the store hands out: plain records of an agent, a step and a block edit, and the store's clock.

No SQL here (the CLI and the trace recorder import these without loading SQLAlchemy).
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

NUL_REPLACEMENT = "\ufffd"


def without_nul(text: str) -> str:
    """`text` with every NUL character replaced by U+FFFD, the one rule for NUL in stored text.

    Postgres text cannot hold NUL (psycopg refuses the whole statement, losing a turn); SQLite can, but its
    full-text index stops at one. So every string pagemind writes to SQL goes through this on both databases
    (`state.engine` applies it to every statement's parameters), and the archival write path applies it before a
    memory reaches the vector store too, so SQL and Qdrant hold the same text. U+FFFD rather than nothing: the
    reader sees that a character was there. JSON columns keep a NUL (serialised as the escape `\\u0000`, which
    both databases store as is).
    """
    return text.replace("\x00", NUL_REPLACEMENT) if "\x00" in text else text


def utcnow() -> datetime:
    """Timezone-aware now, the only clock the store uses for bookkeeping columns."""
    return datetime.now(UTC)


def aware(value: datetime) -> datetime:
    """A datetime read back from the database, as UTC (SQLite hands datetimes back naive; all we store is UTC)."""
    return value if value.tzinfo else value.replace(tzinfo=UTC)


@dataclass(frozen=True)
class StepRecord:
    """What the loop knows about a finished step, before it is stored."""

    turn_id: str
    step_index: int
    model: str
    prompt_tokens: int | None
    completion_tokens: int | None
    stop_reason: str | None
    started_at: datetime
    model_ms: float
    total_ms: float
    cached_tokens: int | None = None  # of prompt_tokens, read from the provider's prompt cache


@dataclass(frozen=True)
class AgentRecord:
    """An agent's identity (`id`; the name can change) and its stored, spec-independent state."""

    id: int
    name: str
    spec_hash: str
    summary: str
    created_at: datetime
    updated_at: datetime
    pressure_warned: bool = False
    token_correction: float = 1.0
    owner: str | None = None  # the end user it belongs to (`state.keys`): its archival memories carry it as user_id


@dataclass(frozen=True)
class BlockVersion:
    """One entry of a block's edit history."""

    label: str
    operation: str
    old_value: str
    new_value: str
    step_id: int | None
    created_at: datetime


@dataclass(frozen=True)
class UsageTotals:
    """An agent's token use summed over its stored steps (`StateStore.usage`): what the provider billed."""

    steps: int
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int  # of prompt_tokens, read from the provider's prompt cache
    steps_reporting_cache: int  # steps whose provider said how much it cached (None elsewhere: not counted)

    @property
    def cached_share(self) -> float | None:
        """Cached prompt tokens ÷ all prompt tokens, or None when no step reported a cache."""
        return self.cached_tokens / self.prompt_tokens if self.steps_reporting_cache and self.prompt_tokens else None
