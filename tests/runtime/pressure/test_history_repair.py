from datetime import UTC, datetime

from pagemind.runtime.messages import Message
from pagemind.runtime.pressure.history_repair import MISSING_RESULT, repair_history
from pagemind.runtime.window import context_order
from pagemind.tools import ToolCall

T = datetime(2026, 1, 1, tzinfo=UTC)


def call(cid: str) -> ToolCall:
    return ToolCall(cid, "core_memory_append", "{}")


def test_valid_history_is_unchanged():
    msgs = [
        Message("user", "hi", T),
        Message("assistant", None, T, tool_calls=(call("a"),)),
        Message("tool", "ok", T, tool_call_id="a"),
    ]
    repair = repair_history(msgs, T)
    assert not repair.changed and repair.messages == msgs


def test_orphan_call_gets_an_explicit_error_result_and_orphan_result_leaves():
    msgs = [
        Message("tool", "stray", T, tool_call_id="zzz"),
        Message("user", "hi", T),
        Message("assistant", None, T, tool_calls=(call("a"), call("b"))),
        Message("tool", "ok", T, tool_call_id="a"),
        Message("user", "hello?", T),
    ]
    repair = repair_history(msgs, T)
    assert [m.role for m in repair.messages] == ["user", "assistant", "tool", "tool", "user"]
    synthetic = repair.messages[3]
    assert (synthetic.tool_call_id, synthetic.is_error, synthetic.content) == ("b", True, MISSING_RESULT)
    assert repair.added == [synthetic] and [m.content for m in repair.dropped] == ["stray"]
    assert len(repair.problems) == 2


def test_context_order_puts_late_results_back_after_their_call():
    a = Message("assistant", None, T, tool_calls=(call("a"),), id=2)
    late = Message("tool", "late", T, tool_call_id="a", id=9)
    msgs = [Message("user", "hi", T, id=1), a, Message("user", "next", T, id=3), late]
    assert [m.id for m in context_order(msgs)] == [1, 2, 9, 3]


def test_reused_call_ids_pair_each_result_with_the_nearest_earlier_call():
    """Some servers send "call_0" in every step; a reload must not move a later result to an earlier call."""
    first = Message("assistant", None, T, tool_calls=(ToolCall("call_0", "core_memory_append", "{}"),), id=2)
    second = Message("assistant", None, T, tool_calls=(ToolCall("call_0", "send_message", "{}"),), id=4)
    msgs = [
        Message("user", "hi", T, id=1),
        first,
        Message("tool", "ok1", T, tool_call_id="call_0", id=3),
        second,
        Message("tool", "ok2", T, tool_call_id="call_0", id=5),
    ]
    ordered = context_order(msgs)
    assert [m.id for m in ordered] == [1, 2, 3, 4, 5]
    assert not repair_history(ordered, T).changed


def test_an_empty_assistant_message_leaves_the_window():
    """`content: null` with no tool calls (stored from an empty-choices response before responses were validated)
    is rejected by strict providers on every request; repair takes it out of view (it stays in recall)."""
    empty = [
        Message("assistant", None, T, id=2),
        Message("assistant", "", T, id=3),
        Message("assistant", " \n", T, id=4),
    ]
    msgs = [
        Message("user", "hi", T, id=1),
        *empty,
        Message("user", "hello?", T, id=5),
        Message("assistant", None, T, tool_calls=(call("a"),), id=6),
        Message("tool", "ok", T, tool_call_id="a", id=7),
    ]
    repair = repair_history(msgs, T)
    assert [m.id for m in repair.messages] == [1, 5, 6, 7]
    assert repair.dropped == empty and not repair.added and len(repair.problems) == 3
    assert not repair_history(repair.messages, T).changed
