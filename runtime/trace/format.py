"""The trace file format: one JSON object per line, a header and then the turn's events.

The first line is the header (schema version, agent, spec, runtime version, model settings, and a snapshot of
core memory and the in-context messages at the start); then one line per event as the runtime reported it
(`pagemind.runtime.events`: turn, model request, model response, tool call, tool result, memory edit, memory
read, runtime event, step end), each with the agent-clock readings taken since the previous line, so a replay can
serve the same clock values. A `memory_read` line is what the turn read from archival or recall memory (its
request and result), which a replay serves in place of memory the trace does not carry (`header.reads` says a
trace has them; older ones do not). `LINE_ADAPTER` validates any line, the header included, into these types by
its `type`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter
from pydantic_core import to_json

from pagemind.runtime.events import Event

SCHEMA_VERSION = 1
TRACE_SUFFIX = ".jsonl"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ToolCallData(_Strict):
    """A tool call inside a stored message."""

    id: str
    name: str
    arguments: str


class MessageSnapshot(_Strict):
    """One in-context message as it stood when the trace started."""

    role: str
    content: str | None
    created_at: datetime
    tool_calls: list[ToolCallData] = []
    tool_call_id: str | None = None
    name: str | None = None
    is_error: bool = False
    turn_id: str | None = None


class BlockSnapshot(_Strict):
    """One core-memory block as it stood when the trace started."""

    label: str
    value: str
    limit: int
    description: str = ""
    read_only: bool = False


class Snapshot(_Strict):
    """The agent's state at the start of the trace: enough to rebuild it in a scratch database."""

    blocks: list[BlockSnapshot]
    messages: list[MessageSnapshot]
    summary: str = ""
    recall_count: int = 0
    archival_count: int | None = None
    agent_state: dict[str, Any] = {}


class Parent(_Strict):
    """Where a forked trace came from."""

    trace: str
    from_step: int


class Header(_Strict):
    """The first line of every trace."""

    clock: list[datetime] = []  # the agent clock's readings before the trace started (taking the snapshot)
    type: Literal["header"] = "header"
    schema_version: int = SCHEMA_VERSION
    trace_id: str
    created_at: datetime
    agent: str
    spec_hash: str
    spec: dict[str, Any]
    runtime_version: str
    model: dict[str, Any]
    snapshot: Snapshot
    parent: Parent | None = None
    redacted: bool = False  # user and memory text replaced by placeholders (`pagemind trace export --redact`)
    reads: bool = False  # the turns' external-memory reads are recorded (`memory_read` lines); older traces lack them


TraceLine = Annotated[Header | Event, Field(discriminator="type")]
LINE_ADAPTER: TypeAdapter[Any] = TypeAdapter(TraceLine)
"""Validates (and dumps) any trace line: the header or an event."""


def dump_line(line: Header | Event | dict[str, Any]) -> bytes:
    """One trace line (without the newline), from the header, an event, or an event's fields in order: the same
    bytes as `LINE_ADAPTER.dump_json`, without the union's dispatch."""
    return to_json(line)
