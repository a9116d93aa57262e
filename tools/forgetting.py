"""Built-in tools for forget and mute by request: `forget`, `mute_topic`, `unmute_topic`.

They reach the agent only through `ToolContext.forgetting` (`runtime.agent` supplies it): no argument names an agent.
Their descriptions are short on purpose: every request carries them (the companion's pinned prompt has a budget).
"""

from __future__ import annotations

from typing import Any

from pagemind.tools.context import ToolContext
from pagemind.tools.dispatch import ToolError
from pagemind.tools.registry import tool


def _forgetting(context: ToolContext) -> Any:
    found = getattr(context, "forgetting", None)
    if found is None:
        raise ToolError("forgetting is not available for this agent")
    return found


@tool
async def forget(query: str, context: ToolContext) -> str:
    """Erase all you remember about what the user asks you to forget ("forget my address").

    Args:
        query: A few words.
    """
    try:
        result: str = await _forgetting(context).forget(query, context.core_memory)
    except ValueError as exc:
        raise ToolError(str(exc)) from None
    return result


@tool
async def mute_topic(topic: str, context: ToolContext) -> str:
    """Stop recalling a topic the user wants dropped ("don't bring up my ex again", 别再提他了).

    Args:
        topic: A few words, with names.
    """
    try:
        new = await _forgetting(context).mute(topic)
    except ValueError as exc:
        raise ToolError(str(exc)) from None
    return f"Muted '{topic}'." if new else f"'{topic}' was already muted."


@tool
async def unmute_topic(topic: str, context: ToolContext) -> str:
    """Allow a muted topic again."""
    try:
        found = await _forgetting(context).unmute(topic)
    except ValueError as exc:
        raise ToolError(str(exc)) from None
    return f"Unmuted '{topic}'." if found else f"'{topic}' was not muted."
