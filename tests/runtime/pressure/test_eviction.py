"""Eviction planning, table-driven. Messages are written as a compact string: u=user, a=assistant text,
A2=assistant calling 2 tools, t=tool result, s=system alert."""

from datetime import UTC, datetime

import pytest

from pagemind.runtime.messages import Message
from pagemind.runtime.pressure.eviction import atomic_groups, newest_group_start, plan_eviction
from pagemind.tools import ToolCall

T = datetime(2026, 1, 1, tzinfo=UTC)


def build(spec: str) -> list[Message]:
    messages, pending = [], []
    for i, token in enumerate(spec.split()):
        if token.startswith("A"):
            pending = [ToolCall(f"c{i}_{k}", "f", "{}") for k in range(int(token[1:] or 1))]
            messages.append(Message("assistant", None, T, tool_calls=tuple(pending)))
        elif token == "t":
            messages.append(Message("tool", "r", T, tool_call_id=pending.pop(0).id))
        else:
            messages.append(Message({"u": "user", "a": "assistant", "s": "system"}[token], "x", T))
    return messages


def test_groups_keep_calls_with_their_results():
    assert atomic_groups(build("u A2 t t a u A1 t")) == [(0, 1), (1, 4), (4, 5), (5, 6), (6, 8)]


@pytest.mark.parametrize(
    "spec, tokens, need, expected",
    [
        # Nothing needed → nothing evicted.
        ("u a u a", [10, 10, 10, 10], 0, (0, 0, True)),
        # Simple: evict the first user/assistant pair, cut lands before a user message.
        ("u a u a", [10, 10, 10, 10], 15, (2, 20, True)),
        # A cut never separates a tool call from its results: needing 15 takes the whole call group.
        ("u A2 t t u a", [10, 10, 10, 10, 10, 10], 15, (4, 40, True)),
        # Extending to the next user message is skipped when it would cost more than the need again.
        ("u A1 t A1 t A1 t u a", [10, 10, 100, 10, 100, 10, 100, 10, 10], 15, (3, 120, True)),
        # A window full of one huge tool result: the newest group is protected, only the user message can go.
        ("u A1 t", [10, 10, 5000], 3000, (1, 10, False)),
        # Nothing evictable: a single group.
        ("A2 t t", [10, 10, 10], 5, (0, 0, False)),
        # Everything but the newest group, still not enough.
        ("u a u a", [10, 10, 10, 10], 1000, (3, 30, False)),
        # System alerts are evicted like any message.
        ("s u a u a", [5, 10, 10, 10, 10], 4, (1, 5, True)),
    ],
)
def test_plan_eviction_table(spec, tokens, need, expected):
    messages = build(spec)
    plan = plan_eviction(messages, tokens, need)
    assert (plan.count, plan.freed_tokens, plan.enough) == expected
    kept = messages[plan.count :]
    kept_calls = {c.id for m in kept for c in m.tool_calls}
    assert all(m.tool_call_id in kept_calls for m in kept if m.role == "tool")


@pytest.mark.parametrize(
    "spec",
    [
        "",
        "u",
        "u a",
        "u A1 t",
        "u A2 t t",
        "u A2 t",
        "A1 t",
        "A2 t t",
        "u A2 t t a u A1 t",
        "A1 t u A3 t t t",
        "u A1",
        "u A1 t +t",
        "A2 t +t",
    ],
)
def test_newest_group_start_is_the_last_groups_start(spec):
    """Read from the end, as atomic_groups reads from the start; `+t` is a result of no call before it."""
    messages = build(spec.replace(" +t", ""))
    if "+t" in spec:
        messages.append(Message("tool", "r", T, tool_call_id="orphan"))
    if not messages:
        assert newest_group_start(messages) == 0
        return
    assert newest_group_start(messages) == atomic_groups(messages)[-1][0]
