"""Replay without trusting the trace: built-in tools run, every other tool's calls get their recorded results.

A trace's header names the agent's tools, custom ones as `package.module:function`. A trace is something people
share (`pagemind replay bug_report.jsonl`), so replay imports nothing it names unless the user says so
(`--trust-tools`): a custom tool here is a stand-in with the schema the recorded requests sent and, for each call,
the result the recording holds (per tool, in order). The built-in memory tools are the runtime's own code and run
for real against the replay's scratch memory.
"""

from __future__ import annotations

from collections import defaultdict, deque
from typing import Any

from pydantic import BaseModel, ConfigDict

from pagemind.runtime.events import ModelRequestEvent, ToolResultEvent
from pagemind.runtime.trace.reader import Trace
from pagemind.tools import BUILTIN_TOOLS, Tool, ToolError

TRUST_HINT = "pass --trust-tools to import and run the tools the trace names"


class _AnyArguments(BaseModel):
    """A stand-in accepts whatever arguments the model sent: the recording says what came of them."""

    model_config = ConfigDict(extra="allow")


def custom_tools(references: list[str]) -> list[str]:
    """The references among `references` that are not built-in tools (would be imported to run)."""
    return [ref for ref in references if ref not in BUILTIN_TOOLS]


def _recorded_schemas(trace: Trace) -> dict[str, dict[str, Any]]:
    for event in trace.events:
        if (
            isinstance(event, ModelRequestEvent)
            and event.purpose == "step"
            and isinstance(event.body.get("tools"), list)
        ):
            return {
                s["function"]["name"]: s
                for s in event.body["tools"]
                if isinstance(s, dict) and isinstance(s.get("function"), dict) and "name" in s["function"]
            }
    return {}


def _stand_in(
    name: str, reference: str, schema: dict[str, Any] | None, results: deque[ToolResultEvent], terminal: bool
) -> Tool:
    async def serve(**_: Any) -> str:
        if not results:
            raise ToolError(f"{name} was not run: the trace records no more results for it ({TRUST_HINT})")
        recorded = results.popleft()
        if recorded.is_error:
            raise ToolError(recorded.content.removeprefix("Error: "))
        return recorded.content

    schema = schema or {
        "type": "function",
        "function": {
            "name": name,
            "description": f"{reference} (not imported: replay serves recorded results)",
            "parameters": {"type": "object", "properties": {}},
        },
    }
    description = str(schema.get("function", {}).get("description", ""))
    return Tool(
        name=name,
        description=description,
        function=serve,
        args_model=_AnyArguments,
        context_param=None,
        terminal=terminal,
        read_only=False,
        schema=schema,
    )


def replay_tools(trace: Trace, references: list[str]) -> dict[str, Tool]:
    """The agent's tools for a replay that trusts nothing: built-ins as they are, a stand-in serving the recorded
    results for every other reference, in the spec's order (the order of the recorded requests' `tools`), and for
    every other tool the recorded requests offered (an MCP server's: a replay starts none)."""
    schemas = _recorded_schemas(trace)
    results: dict[str, deque[ToolResultEvent]] = defaultdict(deque)
    for event in trace.events:
        if isinstance(event, ToolResultEvent):
            results[event.name].append(event)
    tools: dict[str, Tool] = {}
    for reference in references:
        if reference in BUILTIN_TOOLS:
            tools[BUILTIN_TOOLS[reference].name] = BUILTIN_TOOLS[reference]
            continue
        # The tool's name is the function's, as @tool names it unless told otherwise; the recorded schema knows.
        guess = reference.partition(":")[2]
        name = guess if guess in schemas or not schemas else _unclaimed(schemas, tools, guess)
        recorded = results[name]
        tools[name] = _stand_in(name, reference, schemas.get(name), recorded, any(r.terminal for r in recorded))
    for name in [n for n in schemas if n not in tools and n not in BUILTIN_TOOLS]:  # an MCP server's: never started
        recorded = results[name]
        tools[name] = _stand_in(name, name, schemas[name], recorded, any(r.terminal for r in recorded))
    return tools


def _unclaimed(schemas: dict[str, dict[str, Any]], tools: dict[str, Tool], guess: str) -> str:
    """A tool registered under another name than its function's: the recorded schema no built-in claims."""
    spare = [n for n in schemas if n not in tools and n not in {t.name for t in BUILTIN_TOOLS.values()}]
    return spare[0] if spare else guess
