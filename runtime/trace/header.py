"""A trace's first line, taken from a live agent: its spec, model settings and a snapshot of its state.

Secrets never enter a trace: no headers are recorded, and URLs lose their userinfo, query and fragment.
"""

from __future__ import annotations

import functools
import json
import uuid
from importlib import metadata
from typing import Any
from urllib.parse import urlsplit, urlunsplit

from pagemind.runtime.messages import Message
from pagemind.runtime.state.records import utcnow
from pagemind.runtime.trace.format import BlockSnapshot, Header, MessageSnapshot, Parent, Snapshot, ToolCallData
from pagemind.tools import ToolCall


@functools.cache
def runtime_version() -> str:
    """The installed pagemind version."""
    try:
        return metadata.version("pagemind")
    except metadata.PackageNotFoundError:
        return "0+unknown"


def strip_userinfo(url: str | None) -> str | None:
    """A URL without `user:password@`, query or fragment, so credentials in a base URL (some gateways take
    the key as `?api-key=…`) never reach a trace."""
    if not url:
        return url
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[-1], query="", fragment=""))


def _public_spec(agent: Any) -> dict[str, Any]:
    spec: dict[str, Any] = agent.spec.model_dump(mode="json")
    spec["model"]["base_url"] = strip_userinfo(spec["model"].get("base_url"))
    return spec


def message_snapshot(message: Message) -> MessageSnapshot:
    """A stored message in trace form."""
    return MessageSnapshot(
        role=message.role,
        content=message.content,
        created_at=message.created_at,
        tool_calls=[ToolCallData(id=c.id, name=c.name, arguments=c.arguments) for c in message.tool_calls],
        tool_call_id=message.tool_call_id,
        name=message.name,
        is_error=message.is_error,
        turn_id=message.turn_id,
    )


def snapshot_message(snapshot: MessageSnapshot) -> Message:
    """A trace message back in runtime form (not yet stored)."""
    calls = tuple(ToolCall(c.id, c.name, c.arguments) for c in snapshot.tool_calls)
    return Message(
        snapshot.role,
        snapshot.content,
        snapshot.created_at,
        tool_calls=calls,
        tool_call_id=snapshot.tool_call_id,
        name=snapshot.name,
        is_error=snapshot.is_error,
        turn_id=snapshot.turn_id,
    )


def take_snapshot(agent: Any) -> Snapshot:
    """The agent's core memory, window and small per-agent state, as they stand."""
    archival = getattr(agent, "archival", None)
    stats = getattr(archival, "stored_stats", None) or getattr(archival, "stats", None)  # (a test's own archival)
    archival_count = stats()[0] if stats is not None else None
    window = agent.window
    state = {"pressure_warned": window.warned, "token_correction": window.correction}
    if agent.monitor.told_squeezed:  # said once per loaded agent: a replay, a new load, must not say it again
        state["pressure_squeezed_told"] = True
    prepared = agent.monitor.prepared()
    if prepared is not None:  # flush work an earlier turn started: a replay holds it as this turn did
        state["flush_prepared"] = {"count": prepared[0], "at": prepared[1].isoformat()}
    return Snapshot(
        blocks=[
            BlockSnapshot(label=b.label, value=b.value, limit=b.limit, description=b.description, read_only=b.read_only)
            for b in agent.memory.blocks
        ],
        messages=[message_snapshot(m) for m in window.messages],
        summary=window.summary,
        recall_count=window.recall_count,
        archival_count=archival_count,
        agent_state=json.loads(json.dumps(state, default=str)),
    )


def make_header(agent: Any, parent: Parent | None = None, trace_id: str | None = None) -> Header:
    """The header for a trace that starts now, from the agent as it stands."""
    model = _public_spec(agent)["model"]
    return Header(
        trace_id=trace_id or uuid.uuid4().hex,
        created_at=utcnow(),
        agent=agent.name,
        spec_hash=agent.spec.spec_hash(),
        spec=_public_spec(agent),
        runtime_version=runtime_version(),
        model=model,
        snapshot=take_snapshot(agent),
        parent=parent,
        reads=True,
    )
