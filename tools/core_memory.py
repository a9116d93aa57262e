"""Built-in tools for pinned core memory, and `send_message`, which ends a turn."""

from __future__ import annotations

import json
from typing import Annotated, Any

from pydantic import BeforeValidator

from pagemind.tools.context import ToolContext
from pagemind.tools.registry import tool


def _usage(context: ToolContext, label: str) -> str:
    block = context.core_memory.get(label)
    return f"Block '{label}' now holds {block.chars}/{block.limit} characters."


@tool(terminal=True)
def send_message(message: str) -> str:
    """Reply to the user; ends your turn."""
    return message


@tool(commits_with_step=True)
def core_memory_append(label: str, content: str, context: ToolContext) -> str:
    """Add a line to a core memory block."""
    context.core_memory.append(label, content, context.now())
    return f"Appended. {_usage(context, label)}"


@tool(commits_with_step=True)
def core_memory_replace(label: str, old_content: str, new_content: str, context: ToolContext) -> str:
    """Replace old_content (exact, found once) in a core memory block; empty new_content deletes it."""
    context.core_memory.replace(label, old_content, new_content, context.now())
    return f"Replaced. {_usage(context, label)}"


@tool(commits_with_step=True)
def memory_rethink(label: str, new_value: str, context: ToolContext) -> str:
    """Rewrite a core memory block whole."""
    context.core_memory.rethink(label, new_value, context.now())
    return f"Rewritten. {_usage(context, label)}"


def _json_object(value: Any) -> Any:
    # Models often send a nested object as a JSON string; take it as the object it spells.
    if isinstance(value, str):
        try:
            return json.loads(value)
        except json.JSONDecodeError:
            return value
    return value


@tool(commits_with_step=True)
def core_memory_update(
    label: str, changes: Annotated[dict[str, Any], BeforeValidator(_json_object)], context: ToolContext
) -> str:
    """Change fields of a JSON block by a merge patch: only what changes; null removes, a list is replaced.

    Args:
        changes: e.g. {"people": {"Leo": {"relation": "brother"}}}
    """
    context.core_memory.update(label, changes, context.now())
    return f"Updated. {_usage(context, label)}"
