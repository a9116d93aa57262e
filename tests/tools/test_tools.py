import asyncio
import json
from datetime import UTC, datetime

import pytest

from pagemind.blocks import Block, CoreMemory
from pagemind.runtime.agent import StepContext
from pagemind.runtime.testing.clock import ManualClock
from pagemind.runtime.testing.step_context import tool_context
from pagemind.tools import BUILTIN_TOOLS, ToolCall, ToolContext, ToolError, dispatch_tool_calls, tool
from pagemind.tools.registry import parse_docstring


@tool
def add(a: int, b: int = 2) -> int:
    """Add two numbers.

    Args:
        a: The first number.
        b: The second number,
            which defaults to two.
    """
    return a + b


@tool(read_only=True)
async def slow_echo(text: str, delay: float = 0.0) -> str:
    """Echo text after waiting.

    Args:
        text: What to echo.
        delay: Seconds to wait (lets a test prove concurrency).
    """
    await asyncio.sleep(delay)
    return text


@tool
def whoami(context: ToolContext) -> str:
    """Say which agent is calling."""
    return context.agent_name


@tool
def explode() -> str:
    """Always fails."""
    raise RuntimeError("boom")


@tool
def refuse() -> str:
    """Refuses politely."""
    raise ToolError("the user said no")


TOOLS = {t.name: t for t in (add, slow_echo, whoami, explode, refuse)}


def ctx() -> StepContext:
    return tool_context(
        "agent-7", core_memory=CoreMemory([Block("human", "", 50)]), clock=ManualClock(datetime(2026, 1, 1, tzinfo=UTC))
    )


def test_schema_comes_from_signature_and_docstring():
    schema = add.openai_schema()["function"]
    assert schema["name"] == "add" and schema["description"] == "Add two numbers."
    props = schema["parameters"]["properties"]
    assert props["a"] == {"type": "integer", "description": "The first number."}
    assert props["b"] == {"type": "integer", "description": "The second number, which defaults to two."}
    assert schema["parameters"]["required"] == ["a"]


@tool
def look(query: str, tags: list[str] | None = None, limit: int | None = None, either: int | str | None = None) -> str:
    """Look something up.

    Args:
        query: What to look for.
        tags: Only these.
        limit: How many.
        either: A number or a name.
    """
    return query


def test_an_optional_parameter_is_shown_as_its_type_and_left_out_of_required():
    schema = look.openai_schema()["function"]["parameters"]
    assert schema["required"] == ["query"] and "additionalProperties" not in schema
    props = schema["properties"]
    assert props["tags"] == {"type": "array", "items": {"type": "string"}, "description": "Only these."}
    assert props["limit"] == {"type": "integer", "description": "How many."}
    # Two types besides null stay a choice (null left in: the shape is not one type).
    assert {"type": "integer"} in props["either"]["anyOf"] and {"type": "string"} in props["either"]["anyOf"]


async def test_an_optional_parameter_left_out_or_sent_as_null_both_work():
    for arguments in ('{"query": "tea"}', '{"query": "tea", "tags": null, "limit": null}'):
        [result] = await dispatch_tool_calls([ToolCall("c1", "look", arguments)], {"look": look}, ctx())
        assert result.content == "tea" and not result.is_error


def test_context_parameter_is_hidden_from_the_schema_and_injected():
    assert whoami.openai_schema()["function"]["parameters"]["properties"] == {}
    [result] = asyncio.run(dispatch_tool_calls([ToolCall("1", "whoami", "{}")], TOOLS, ctx()))
    assert (result.content, result.is_error) == ("agent-7", False)


def test_decorated_function_stays_callable():
    assert add(1, 5) == 6


def test_a_tool_without_docstring_is_rejected():
    with pytest.raises(TypeError, match="docstring"):
        tool(lambda x: x)


def test_docstring_parser_ignores_returns_section():
    desc, params = parse_docstring("""Do it.\n\nArgs:\n    x: the x.\n\nReturns:\n    y: not a param.\n""")
    assert desc == "Do it." and params == {"x": "the x."}


@pytest.mark.parametrize(
    "call, expected",
    [
        (ToolCall("1", "add", '{"a": 1'), "not valid JSON"),
        (ToolCall("1", "nope", "{}"), "unknown tool 'nope'. Available tools: add, explode"),
        (ToolCall("1", "add", '{"a": "x"}'), "invalid arguments for add (a: Input should be a valid integer"),
        (ToolCall("1", "add", '{"a": 1, "c": 3}'), "c: Extra inputs are not permitted"),
        (ToolCall("1", "add", "[1, 2]"), "must be a JSON object"),
        (ToolCall("1", "explode", "{}"), "explode failed: RuntimeError: boom"),
        (ToolCall("1", "refuse", ""), "Error: the user said no"),
    ],
)
def test_every_failure_becomes_an_error_result(call, expected):
    [result] = asyncio.run(dispatch_tool_calls([call], TOOLS, ctx()))
    assert result.is_error and expected in result.content and result.call_id == "1"


def test_results_come_back_in_call_order_and_read_only_calls_run_concurrently():
    calls = [
        ToolCall("a", "slow_echo", json.dumps({"text": "first", "delay": 0.05})),
        ToolCall("b", "slow_echo", json.dumps({"text": "second", "delay": 0.0})),
        ToolCall("c", "add", '{"a": 40}'),
    ]
    order: list[str] = []

    async def run():
        original = slow_echo.function

        async def tracking(text: str, delay: float = 0.0) -> str:
            order.append(f"start:{text}")
            result = await original(text, delay)
            order.append(f"end:{text}")
            return result

        object.__setattr__(slow_echo, "function", tracking)
        try:
            return await dispatch_tool_calls(calls, TOOLS, ctx())
        finally:
            object.__setattr__(slow_echo, "function", original)

    results = asyncio.run(run())
    assert [r.call_id for r in results] == ["a", "b", "c"]
    assert [r.content for r in results] == ["first", "second", "42"]
    # Both started before either finished: they overlapped.
    assert order[:2] == ["start:first", "start:second"]


def test_builtin_core_memory_tools_edit_the_working_copy():
    context = ctx()
    [ok, too_big] = asyncio.run(
        dispatch_tool_calls(
            [
                ToolCall("1", "core_memory_append", '{"label": "human", "content": "Lin"}'),
                ToolCall("2", "core_memory_append", json.dumps({"label": "human", "content": "x" * 60})),
            ],
            BUILTIN_TOOLS,
            context,
        )
    )
    assert not ok.is_error and "3/50" in ok.content
    assert too_big.is_error and "limit is 50" in too_big.content
    assert context.core_memory.get("human").value == "Lin"
    assert BUILTIN_TOOLS["send_message"].terminal
