"""The API's request and response bodies (pydantic at the boundary; the daemon's own types are dataclasses).

Requests forbid unknown fields: a misspelt `idempotency_kye` is a 422, not a message sent without its key.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from pagemind.runtime.spec.tuning import ArchivalConfig
from pagemind.tools.context import ArchivalHit, RecallHit

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"  # also a safe URL path segment
USER_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._@+:-]{0,127}$"  # an end user's id (`runtime.state.keys.USER_ID`)
# The longest archival memory an agent takes by default: the API promises no more than its write path accepts.
MEMORY_CHARS: int = ArchivalConfig.model_fields["max_memory_chars"].default


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid")


class CreateAgent(_Request):
    """An agent made from a template (its spec, renamed), with optional initial block values. (A whole agent
    definition is posted as YAML instead: `Content-Type: application/yaml`.)"""

    name: str = Field(pattern=NAME_PATTERN, description="the new agent's name, e.g. one per end user")
    template: str = Field(min_length=1, description="a template or agent the daemon serves")
    blocks: dict[str, str] = Field(default_factory=dict, description="initial values of core blocks, by label")
    owner: str | None = Field(
        None,
        pattern=USER_PATTERN,
        description="the end user it belongs to (admin keys only; an agent made with a user key is its user's)",
    )


class AssignOwner(_Request):
    """Who an agent belongs to from now on."""

    owner: str | None = Field(
        pattern=USER_PATTERN, description="an end user's id (its user keys then reach the agent); null: nobody's"
    )


class AgentOut(BaseModel):
    """An agent the daemon serves."""

    name: str
    template: str | None = None
    created_at: datetime | None = None
    pending: int = Field(0, description="messages and jobs accepted and not finished yet")
    owner: str | None = Field(None, description="the end user it belongs to; null: nobody's (admin keys only)")


class PurgeOut(BaseModel):
    """What a purge erased (`DELETE /v1/agents/{name}?purge=true`)."""

    name: str
    purged: Literal[True] = True
    counts: dict[str, dict[str, int]] = Field(
        description="per store: `sql` (rows per table, the recall index and the embedding cache included), "
        "`vectors` (points), `traces` (files)"
    )


class UserPurgeOut(BaseModel):
    """What erasing an end user did (`DELETE /v1/users/{user}`)."""

    user: str
    agents: list[PurgeOut] = Field(description="the user's agents made through the API, each purged")
    kept: list[str] = Field(description="agents of the served folder given to the user: only their files remove them")
    keys_deleted: int = Field(description="the user's keys, deleted (revoked ones included)")


class AgentList(BaseModel):
    """Every agent the daemon serves."""

    agents: list[AgentOut]


class SendMessage(_Request):
    """A user's message to an agent."""

    content: str = Field(min_length=1, max_length=200_000)
    idempotency_key: str | None = Field(
        None, min_length=1, max_length=200, description="the same key again returns the first run, and runs nothing"
    )
    mode: Literal["sync", "async"] = Field(
        "sync", description="sync: wait for the reply (up to timeout_s); async: answer 202 with the run id at once"
    )
    timeout_s: float = Field(60.0, gt=0, le=600, description="sync: how long to wait before answering 202")


class RunOut(BaseModel):
    """One accepted message or job: its state, and its result once done."""

    run_id: str
    agent: str
    kind: str
    state: Literal["pending", "running", "done", "failed"]
    content: str
    idempotency_key: str | None = None
    attempts: int = 0
    created_at: datetime
    started_at: datetime | None = None
    finished_at: datetime | None = None
    reply: str | None = None
    stop_reason: str | None = None
    steps: int | None = None
    turn_id: str | None = None
    result: dict[str, Any] | None = None
    error: str | None = None

    @classmethod
    def of(cls, item: Any) -> RunOut:
        """From the daemon's `InboxItem`."""
        result = item.result or {}
        return cls(
            run_id=item.run_id,
            agent=item.agent_name,
            kind=item.kind,
            state=item.state,
            content=item.content,
            idempotency_key=item.idempotency_key,
            attempts=item.attempts,
            created_at=item.created_at,
            started_at=item.started_at,
            finished_at=item.finished_at,
            reply=result.get("reply"),
            stop_reason=result.get("stop_reason"),
            steps=result.get("steps"),
            turn_id=result.get("turn_id"),
            result=item.result,
            error=item.error,
        )


class BlockOut(BaseModel):
    """A core-memory block."""

    label: str
    value: str
    chars: int
    limit: int
    description: str = ""
    read_only: bool = False


class MemoryOut(BaseModel):
    """An agent's core memory, in prompt order."""

    agent: str
    blocks: list[BlockOut]


class PatchBlock(_Request):
    """A block's new value (recorded in its history as an edit by the API)."""

    value: str = Field(max_length=100_000)


class ArchivalInsertIn(_Request):
    """A memory to store (the write path may refresh a near-duplicate or supersede a contradicted one)."""

    content: str = Field(
        min_length=1,
        max_length=MEMORY_CHARS,
        description=f"at most {MEMORY_CHARS:,} characters (an agent's memory.advanced.archival.max_memory_chars, "
        "when lower, refuses more with 422)",
    )
    kind: Literal["fact", "preference", "progress", "todo", "episode", "constraint", "reflection"] = "fact"
    tags: list[str] = Field(default_factory=list, max_length=20)
    importance: float | None = Field(None, ge=0, le=1)


class ArchivalMemoryOut(BaseModel):
    """One archival memory as listed."""

    id: str
    text: str
    kind: str
    tags: list[str]
    importance: float
    created_at: datetime
    hit_count: int = 0
    superseded_by: str | None = None
    expires_at: datetime | None = None


class ArchivalList(BaseModel):
    """An agent's archival memories, newest first."""

    count: int = Field(description="live memories")
    tags: list[str]
    memories: list[ArchivalMemoryOut]


# Search results go out as the tools see them (one model, `tools.context`).
ArchivalHitOut = ArchivalHit
RecallHitOut = RecallHit


class ContextOut(BaseModel):
    """The window now, as `pagemind context --json` reports it: tokens per section and the pressure lines."""

    model_config = ConfigDict(extra="allow")

    tokens: int
    usable: int
    context_window: int
    warn_at: int
    flush_at: int
    target: int
    level: str
    correction: float
    sections: dict[str, int]
    grouped: dict[str, int]


class KeyIn(_Request):
    """A key to make."""

    user: str | None = Field(
        None, pattern=USER_PATTERN, description="the end user it acts for (required for scope user)"
    )
    scope: Literal["user", "admin"] = Field("user", description="user: that user's agents only; admin: every agent")


class KeyOut(BaseModel):
    """A key as stored: never the key itself."""

    id: str = Field(description="its public name, for listings and revocation")
    user: str | None = None
    scope: str
    created_at: datetime
    revoked_at: datetime | None = None


class KeyMade(KeyOut):
    """A new key, with the key itself: shown this once (only its hash is stored)."""

    key: str


class KeyList(BaseModel):
    """Every key, oldest first."""

    keys: list[KeyOut]


class UsageOut(BaseModel):
    """An agent's token use summed over its stored steps, with the provider's prompt-cache hits and, when the
    agent's YAML gives `model.prices`, the estimated cost."""

    agent: str
    steps: int = Field(description="model steps stored for the agent")
    prompt_tokens: int = Field(description="prompt tokens the provider counted, cached ones included")
    cached_tokens: int = Field(description="of prompt_tokens, those the provider read from its prompt cache")
    completion_tokens: int
    steps_reporting_cache: int = Field(description="steps whose provider said how many tokens it cached")
    cached_share: float | None = Field(description="cached_tokens ÷ prompt_tokens; null when no step reported it")
    cost_usd: float | None = Field(description="estimated from model.prices; null without prices")
