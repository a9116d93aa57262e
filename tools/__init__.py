"""The tool registry and the built-in memory tools."""

from pagemind.tools.archival import archival_memory_insert, archival_search, conversation_search
from pagemind.tools.context import ArchivalMemory, Forgetting, RecallMemory, ToolContext
from pagemind.tools.core_memory import (
    core_memory_append,
    core_memory_replace,
    core_memory_update,
    memory_rethink,
    send_message,
)
from pagemind.tools.dispatch import ToolCall, ToolError, ToolResult, dispatch_tool_calls
from pagemind.tools.forgetting import forget, mute_topic, unmute_topic
from pagemind.tools.registry import Tool, tool

BUILTIN_TOOLS: dict[str, Tool] = {
    t.name: t
    for t in (
        send_message,
        core_memory_append,
        core_memory_replace,
        memory_rethink,
        core_memory_update,
        archival_memory_insert,
        archival_search,
        conversation_search,
        forget,
        mute_topic,
        unmute_topic,
    )
}
"""Built-in tools by name; later memory tiers register theirs here."""

__all__ = [
    "ArchivalMemory",
    "BUILTIN_TOOLS",
    "Forgetting",
    "RecallMemory",
    "Tool",
    "ToolCall",
    "ToolContext",
    "ToolError",
    "ToolResult",
    "dispatch_tool_calls",
    "tool",
]
