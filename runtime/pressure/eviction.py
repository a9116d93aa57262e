"""Eviction planning: which of the oldest in-context messages to page out. A pure function.

Messages leave the window in atomic groups: an assistant message that calls tools leaves together with its
tool results, so no request ever holds a call without its results or a result without its call. The newest
group always stays (it is what the model is working on).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pagemind.runtime.messages import Message


@dataclass(frozen=True)
class EvictionPlan:
    """Evict `messages[:count]`, which frees `freed_tokens`; `enough` says whether that meets the need."""

    count: int
    freed_tokens: int
    enough: bool


def atomic_groups(messages: Sequence[Message]) -> list[tuple[int, int]]:
    """[start, end) index ranges that must stay or go together: a tool-calling assistant message with its results."""
    groups: list[tuple[int, int]] = []
    index = 0
    while index < len(messages):
        end = index + 1
        if messages[index].role == "assistant" and messages[index].tool_calls:
            call_ids = {c.id for c in messages[index].tool_calls}
            while end < len(messages) and messages[end].role == "tool" and messages[end].tool_call_id in call_ids:
                end += 1
        groups.append((index, end))
        index = end
    return groups


def newest_group_start(messages: Sequence[Message]) -> int:
    """Where the newest atomic group begins (`atomic_groups(messages)[-1][0]`), read from the end: the pressure
    monitor asks on every step above the warning line, and walking the whole window for it grew with the window."""
    if not messages:
        return 0
    last = start = len(messages) - 1
    while start > 0 and messages[start].role == "tool":
        start -= 1
    head = messages[start]
    if start == last or head.role != "assistant" or not head.tool_calls:
        return last
    call_ids = {c.id for c in head.tool_calls}
    return start if all(m.tool_call_id in call_ids for m in messages[start + 1 :]) else last


def plan_eviction(messages: Sequence[Message], tokens: Sequence[int], need: int) -> EvictionPlan:
    """The shortest prefix of whole groups that frees at least `need` tokens, never touching the newest group.

    Once enough is freed, the cut moves on to the next user message if that costs at most `need` again, so the
    window starts with a user turn where it cheaply can (some chat templates require it).
    """
    if need <= 0:
        return EvictionPlan(0, 0, True)
    groups = atomic_groups(messages)[:-1]  # the newest group is protected
    freed, count = 0, 0
    for start, end in groups:
        if freed >= need:
            break
        freed += sum(tokens[start:end])
        count = end
    if freed < need:
        return EvictionPlan(count, freed, False)
    extra, extended = 0, count
    for start, end in groups:
        if start < count:
            continue
        if messages[start].role == "user":
            if extra <= need:
                count, freed = extended, freed + extra
            break
        extra += sum(tokens[start:end])
        extended = end
    return EvictionPlan(count, freed, True)
