"""Run the tool calls of one model response; every failure becomes a tool result the model can act on."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import structlog
from pydantic import BaseModel, ValidationError

from pagemind.blocks import BlockEditError
from pagemind.tools.context import ToolContext
from pagemind.tools.registry import Tool

log = structlog.get_logger("pagemind.tools")


@dataclass(frozen=True)
class ToolCall:
    """A tool call as the model emitted it: arguments are the raw JSON string."""

    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class ToolResult:
    """What goes back to the model for one call."""

    call_id: str
    name: str
    content: str
    is_error: bool
    terminal: bool = False


class ToolError(Exception):
    """Raise from a tool to send the model a plain error message (no traceback-ish prefix)."""


def render_output(value: Any) -> str:
    """Tool return values as the text the model reads: strings as they are, anything else as JSON."""
    if isinstance(value, str):
        return value
    if isinstance(value, BaseModel):
        return value.model_dump_json()
    return json.dumps(value, default=str, ensure_ascii=False)


def _validation_message(tool: Tool, error: ValidationError) -> str:
    problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or '(arguments)'}: {e['msg']}" for e in error.errors())
    expected = ", ".join(tool.args_model.model_fields) or "no arguments"
    return f"Error: invalid arguments for {tool.name} ({problems}). Expected: {expected}."


def _parse(call: ToolCall, tools: dict[str, Tool]) -> tuple[Tool, BaseModel] | str:
    tool = tools.get(call.name)
    if tool is None:
        known = ", ".join(sorted(tools))
        return f"Error: unknown tool '{call.name}'. Available tools: {known}."
    try:
        raw = json.loads(call.arguments) if call.arguments.strip() else {}
    except json.JSONDecodeError as exc:
        return f"Error: arguments for {call.name} are not valid JSON ({exc.msg} at char {exc.pos}). Send a JSON object."
    if not isinstance(raw, dict):
        return f"Error: arguments for {call.name} must be a JSON object, got {type(raw).__name__}."
    try:
        return tool, tool.args_model.model_validate(raw)
    except ValidationError as exc:
        return _validation_message(tool, exc)


async def _run_one(call: ToolCall, tools: dict[str, Tool], context: ToolContext | None) -> ToolResult:
    parsed = _parse(call, tools)
    if isinstance(parsed, str):
        log.warning("tool_call_rejected", tool=call.name, call_id=call.id, error=parsed)
        return ToolResult(call.id, call.name, parsed, is_error=True)
    tool, arguments = parsed
    try:
        output = render_output(await tool.invoke(arguments, context.for_call(call.id) if context else None))
    except (BlockEditError, ToolError) as exc:
        log.info("tool_call_refused", tool=call.name, call_id=call.id, error=str(exc))
        return ToolResult(call.id, call.name, f"Error: {exc}", is_error=True)
    except Exception as exc:  # a tool's bug must not end the turn: the model gets the error and goes on
        log.exception("tool_call_failed", tool=call.name, call_id=call.id)
        return ToolResult(call.id, call.name, f"Error: {call.name} failed: {type(exc).__name__}: {exc}", is_error=True)
    log.info("tool_call", tool=call.name, call_id=call.id, terminal=tool.terminal)
    return ToolResult(call.id, call.name, output, is_error=False, terminal=tool.terminal)


def _batches(calls: Iterable[ToolCall], tools: dict[str, Tool]) -> list[list[ToolCall]]:
    """Consecutive read-only calls form one concurrent batch; every other call runs alone, in order."""
    batches: list[list[ToolCall]] = []
    for call in calls:
        tool = tools.get(call.name)
        concurrent = tool is not None and tool.read_only
        if concurrent and batches and batches[-1][-1].name in tools and tools[batches[-1][-1].name].read_only:
            batches[-1].append(call)
        else:
            batches.append([call])
    return batches


async def dispatch_tool_calls(
    calls: list[ToolCall], tools: dict[str, Tool], context: ToolContext | None
) -> list[ToolResult]:
    """Run every call (read-only ones concurrently) and return their results in call order."""
    results: list[ToolResult] = []
    for batch in _batches(calls, tools):
        results.extend(await asyncio.gather(*(_run_one(call, tools, context) for call in batch)))
    return results
