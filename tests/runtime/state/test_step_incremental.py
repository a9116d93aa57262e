"""Per-step work is incremental (the wire cache, the repair's fast check) and gives exactly what the full
computation gives, whatever happened to the window between two compiles."""

from __future__ import annotations

import random
from datetime import UTC, datetime

from pagemind.runtime.compiler import ContextInputs, MemoryStats, WireCache, compile_context
from pagemind.runtime.messages import Message, encode_json
from pagemind.runtime.model.client import ModelRequest
from pagemind.runtime.pressure.history_repair import ValidityMemo, is_valid, repair_history
from pagemind.tools import ToolCall

NOW = datetime(2026, 11, 30, 12, 0, tzinfo=UTC)


def conversation(rng: random.Random, groups: int, start: int = 0) -> list[Message]:
    """Whole groups: a user message, or an assistant reply, or an assistant call with its results."""
    messages: list[Message] = []
    for g in range(start, start + groups):
        kind = rng.choice(["user", "reply", "calls"])
        if kind == "user":
            messages.append(Message("user", f"user says {g} " + "word " * rng.randint(0, 400), NOW))
        elif kind == "reply":
            messages.append(Message("assistant", f"reply {g}", NOW))
        else:
            calls = tuple(
                ToolCall(f"c{g}-{i}", "archival_search", f'{{"query": "q{g}"}}') for i in range(rng.randint(1, 3))
            )
            messages.append(Message("assistant", None, NOW, tool_calls=calls))
            messages += [Message("tool", f"result {c.id}", NOW, tool_call_id=c.id, name=c.name) for c in calls]
    return messages


def inputs(messages: list[Message], cache: WireCache | None) -> ContextInputs:
    return ContextInputs(
        system="You are a test agent.",
        blocks=(),
        messages=tuple(messages),
        stats=MemoryStats(NOW, 10, len(messages)),
        max_message_tokens=200,
        wire_cache=cache,
    )


def test_the_wire_cache_compiles_what_a_full_compile_gives_through_appends_drops_and_replacements():
    rng = random.Random(11)
    cache = WireCache()
    window = conversation(rng, 30)
    for round_ in range(60):
        action = rng.choice(["append", "drop", "both", "replace", "reload", "same"])
        if action in ("append", "both"):
            window = window + conversation(rng, rng.randint(1, 3), start=1000 + round_ * 10)
        if action in ("drop", "both"):
            window = window[rng.randint(1, 8) :]
        if action == "replace" and window:  # a repair swaps a message in the middle for another object
            i = rng.randrange(len(window))
            old = window[i]
            window = [
                *window[:i],
                Message(old.role, old.content, NOW, old.tool_calls, old.tool_call_id, old.name),
                *window[i + 1 :],
            ]
        if action == "reload":  # the same messages read again from the store: equal, not identical
            window = [Message(m.role, m.content, NOW, m.tool_calls, m.tool_call_id, m.name) for m in window]
        cached, full = compile_context(inputs(window, cache)), compile_context(inputs(window, None))
        assert cached == full, action
        # The body joined from the cached per-message JSON is the body encoded whole, byte for byte.
        request = ModelRequest("m", cached.messages, [{"type": "function"}], 0.7, 99, encoded_messages=cached.encoded)
        assert request.encoded() == encode_json(request.body())
        assert cache.messages == tuple(window)


def test_the_wire_cache_starts_over_when_the_clip_limit_changes():
    window = conversation(random.Random(3), 20)
    cache = WireCache()
    compile_context(inputs(window, cache))
    changed = ContextInputs(**{**inputs(window, cache).__dict__, "max_message_tokens": 5})
    assert compile_context(changed) == compile_context(ContextInputs(**{**changed.__dict__, "wire_cache": None}))


def test_the_fast_check_agrees_with_the_repair_on_broken_windows():
    rng = random.Random(5)
    for _ in range(400):
        window = conversation(rng, rng.randint(0, 8))
        for _ in range(rng.randint(0, 2)):  # break it: lose a message, or blank an assistant reply
            if window and rng.random() < 0.7:
                del window[rng.randrange(len(window))]
            elif window:
                i = rng.randrange(len(window))
                if window[i].role == "assistant" and not window[i].tool_calls:
                    window[i] = Message("assistant", None, NOW)
        repair = repair_history(window, NOW)
        assert is_valid(window) == (not repair.changed)
        if not repair.changed:
            assert repair.messages == window


def test_the_remembered_check_agrees_with_the_whole_check_whatever_happens_to_the_window():
    rng = random.Random(17)
    memo, window = ValidityMemo(), conversation(rng, 12)
    outcomes = set()
    for round_ in range(1500):
        action = rng.choice(["append", "drop", "both", "cut_end", "break", "replace", "reload", "same"])
        if action in ("append", "both"):
            window = window + conversation(rng, rng.randint(1, 3), start=1000 + round_ * 10)
        if action in ("drop", "both"):  # from the front, anywhere: a group's results may lead the window
            window = window[rng.randint(1, 4) :]
        if action == "cut_end" and window:  # a call may lose its results
            window = window[: rng.randrange(len(window))]
        if action == "break" and window:
            i = rng.randrange(len(window))
            window = [*window[:i], *window[i + 1 :]]
        if action == "replace" and window:
            i = rng.randrange(len(window))
            window = [*window[:i], Message("assistant", None, NOW), *window[i + 1 :]]
        if action == "reload":
            window = [Message(m.role, m.content, NOW, m.tool_calls, m.tool_call_id, m.name) for m in window]
        if not is_valid(window) and rng.random() < 0.5:
            window = repair_history(window, NOW).messages  # as the monitor would, then the window goes on
        assert memo.is_valid(window) == is_valid(window), action
        outcomes.add(is_valid(window))
    assert outcomes == {True, False}
