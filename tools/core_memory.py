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
    """Send a message to the user. This ends your turn; the user sees only this text.

    Args:
        message: The full text of your reply to the user.
    """
    return message


@tool(commits_with_step=True)
def core_memory_append(label: str, content: str, context: ToolContext) -> str:
    """Append a line to one of your core memory blocks (always in your prompt). Use it for lasting facts.

    Args:
        label: The block to edit, e.g. "human" or "persona".
        content: The text to add, as a new line at the end of the block.
    """
    context.core_memory.append(label, content, context.now())
    return f"Appended. {_usage(context, label)}"


@tool(commits_with_step=True)
def core_memory_replace(label: str, old_content: str, new_content: str, context: ToolContext) -> str:
    """Replace text in a core memory block. old_content must match exactly one place in the block.

    Args:
        label: The block to edit.
        old_content: The exact text to replace; it must occur exactly once in the block.
        new_content: The new text. An empty string deletes old_content.
    """
    context.core_memory.replace(label, old_content, new_content, context.now())
    return f"Replaced. {_usage(context, label)}"


@tool(commits_with_step=True)
def memory_rethink(label: str, new_value: str, context: ToolContext) -> str:
    """Rewrite a core memory block completely, e.g. to reorganise or condense it.

    Args:
        label: The block to rewrite.
        new_value: The block's complete new text.
    """
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
    """Change fields of a structured core memory block (one shown with format="json", such as "profile").

    Send only what changes, as a JSON merge patch: a field you give is set; a nested object is merged field by
    field; a list is replaced whole; a field set to null is removed. The result must still fit the block's
    fields (listed in the block); if it does not, nothing changes and the error names the field to fix.

    Args:
        label: The structured block to change, e.g. "profile".
        changes: The fields to set or remove, e.g. {"name": "Mia", "people": {"Leo": {"relation": "brother"}}}
            adds Leo and keeps everyone else; {"people": {"Leo": null}} removes Leo.
    """
    context.core_memory.update(label, changes, context.now())
    return f"Updated. {_usage(context, label)}"
