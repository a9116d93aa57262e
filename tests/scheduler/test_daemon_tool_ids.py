"""Tool calls with side effects get the tool-call id as an idempotency key (issue 12, item 6): a step redone after
a crash calls the tool again with the same id, and a tool that keys its effect by it applies it once."""

from __future__ import annotations

from pagemind.runtime.testing.models import FunctionModel, by_purpose
from pagemind.runtime.testing.responses import tool_call_body
from pagemind.runtime.testing.step_context import tool_context
from pagemind.tools import ToolCall, ToolContext, dispatch_tool_calls, tool
from tests.scheduler.test_daemon_core import make_daemon
from tests.support.daemon_support import write_agents

CHARGES: dict[str, int] = {}  # the outside world: charges by idempotency key


@tool
def charge(amount: int, context: ToolContext) -> str:
    """Charge the user's card.

    Args:
        amount: How much.
    """
    key = context.tool_call_id
    if key in CHARGES:
        return f"already charged {CHARGES[key]} (request {key})"
    CHARGES[key] = amount
    return f"charged {amount}"


async def test_each_call_gets_its_own_id_and_a_repeat_applies_once():
    CHARGES.clear()
    calls = [ToolCall("call_a", "charge", '{"amount": 5}'), ToolCall("call_b", "charge", '{"amount": 7}')]
    first = await dispatch_tool_calls(calls, {"charge": charge}, tool_context())
    again = await dispatch_tool_calls(calls[:1], {"charge": charge}, tool_context())  # the step, redone
    assert [r.content for r in first] == ["charged 5", "charged 7"]
    assert again[0].content == "already charged 5 (request call_a)"
    assert CHARGES == {"call_a": 5, "call_b": 7}
    assert tool_context().tool_call_id is None  # outside a call


async def test_a_daemon_turn_passes_the_model_s_call_id_to_the_tool(tmp_path, sqlite_url):
    CHARGES.clear()
    tools = ["send_message", "tests.scheduler.test_daemon_tool_ids:charge"]
    folder = write_agents(tmp_path / "agents", tools=tools)

    def step(request):
        last_user = max(i for i, m in enumerate(request.messages) if m["role"] == "user")
        if any(m["role"] == "tool" for m in request.messages[last_user:]):
            return tool_call_body("send_message", {"message": "done"})
        return tool_call_body("charge", {"amount": 3}, call_id="call_charge_1")

    daemon = make_daemon(sqlite_url, folder, FunctionModel(by_purpose(step)))
    await daemon.start()
    try:
        done = await daemon.wait((await daemon.submit("alice", "pay 3")).run_id, timeout=30)
    finally:
        await daemon.stop()
    assert done.result["reply"] == "done"
    assert CHARGES == {"call_charge_1": 3}
