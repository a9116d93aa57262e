"""A bundle written as a Letta agent file (`.af`), in Letta's current schema (`AgentFileSchema`).

One agent, its blocks (`block-N`), its tools (`tool-N`: pagemind's built-ins under Letta's names where Letta has
one, each with its JSON schema and no source code; a custom tool by its name and schema alone) and its messages
(`message-N`). Letta's window starts with the compiled system message, so message `message-0` is the system prompt,
first in `in_context_message_ids`, followed by the messages pagemind has in view; the others are in `messages`
only (recall). A tool result carries its `tool_returns` (status `error` for a failed call) as Letta writes them.
What Letta has no field for (the recursive summary, `max_steps_per_turn`) goes in the agent's
`metadata.pagemind`, which Letta keeps and ignores, so that a pagemind import of the file is the same agent again.
Archival memory is not part of the format (Letta's files carry no passages either): use the JSON Lines export.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pagemind.runtime.porting.records import Bundle
from pagemind.tools import BUILTIN_TOOLS

LETTA_NAMES = {"archival_search": "archival_memory_search"}  # pagemind → Letta, where the names differ
MEMORY_TOOLS = {"core_memory_append", "core_memory_replace", "memory_rethink", "core_memory_update"}


def agent_file(bundle: Bundle, exported_at: datetime, version: str, *, redacted: bool = False) -> dict[str, Any]:
    """The agent file (a JSON document) for `bundle`; `redacted` (its personal data is placeholders) is said in the
    file's `metadata`."""
    spec = bundle.agent["spec"]
    model = spec.get("model") or {}
    order = {b.get("label"): i for i, b in enumerate(spec.get("blocks") or [])}  # the prompt's order
    ordered = sorted(bundle.of("block"), key=lambda b: order.get(b["label"], len(order)))
    blocks = [_block(i, b) for i, b in enumerate(ordered)]
    tools = [_tool(i, name) for i, name in enumerate(spec.get("tools") or [])]
    messages = [_system_message(spec, bundle.agent.get("created_at"))]
    in_context = ["message-0"]
    for record in bundle.of("message"):
        written = _message(len(messages), record)
        messages.append(written)
        if record.get("in_context"):
            in_context.append(written["id"])
    agent = {
        "id": "agent-0",
        "name": bundle.name,
        "description": spec.get("description") or None,
        "system": spec.get("system", ""),
        "agent_type": "memgpt_v2_agent",
        "llm_config": {
            "model": model.get("name"),
            "model_endpoint_type": "openai",
            "model_endpoint": model.get("base_url") or "https://api.openai.com/v1",
            "context_window": model.get("context_window"),
            "max_tokens": model.get("max_output_tokens"),
            "temperature": model.get("temperature"),
        },
        "embedding_config": None,
        "block_ids": [b["id"] for b in blocks],
        "tool_ids": [t["id"] for t in tools],
        "tool_rules": [],
        "tags": [],
        "memory_blocks": [],
        "tools": [],
        "source_ids": [],
        "group_ids": [],
        "files_agents": [],
        "messages": messages,
        "in_context_message_ids": in_context,
        "message_buffer_autoclear": False,
        "metadata": {
            "pagemind": {
                "summary": bundle.agent.get("summary", ""),
                "max_steps_per_turn": spec.get("max_steps_per_turn"),
            }
        },
    }
    return {
        "agents": [agent],
        "groups": [],
        "blocks": blocks,
        "files": [],
        "sources": [],
        "tools": tools,
        "mcp_servers": [],
        "metadata": {"exported_by": f"pagemind {version}", **({"redacted": True} if redacted else {})},
        "created_at": exported_at.isoformat(),
    }


def _block(index: int, record: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": f"block-{index}",
        "label": record["label"],
        "value": record["value"],
        "limit": record["char_limit"],
        "description": record.get("description") or None,
        "read_only": bool(record.get("read_only")),
        "is_template": False,
        "metadata": {},
    }


def _tool(index: int, reference: str) -> dict[str, Any]:
    builtin = BUILTIN_TOOLS.get(reference)
    name = LETTA_NAMES.get(reference, reference) if builtin else reference.rpartition(":")[2]
    schema: dict[str, Any] = {"name": name, "description": "", "parameters": {"type": "object", "properties": {}}}
    if builtin is not None:
        schema = {**builtin.openai_schema()["function"], "name": name}
    return {
        "id": f"tool-{index}",
        "name": name,
        "description": schema.get("description") or None,
        "tool_type": ("letta_memory_core" if reference in MEMORY_TOOLS else "letta_core") if builtin else "custom",
        "source_type": "python",
        "source_code": None,  # a custom tool's code stays with its owner: the file carries its schema only
        "json_schema": schema,
        "tags": [],
        "return_char_limit": 50000,
    }


def _system_message(spec: dict[str, Any], created_at: Any) -> dict[str, Any]:
    return {
        "type": "message",
        "id": "message-0",
        "role": "system",
        "content": [{"type": "text", "text": spec.get("system", "")}],
        "tool_calls": None,
        "tool_call_id": None,
        "tool_returns": [],
        "name": None,
        "created_at": created_at,
    }


def _message(index: int, record: dict[str, Any]) -> dict[str, Any]:
    content = record.get("content")
    calls = record.get("tool_calls") or None
    written: dict[str, Any] = {
        "type": "message",
        "id": f"message-{index}",
        "role": record["role"],
        "content": [] if content is None else [{"type": "text", "text": content}],
        "name": record.get("name"),
        "tool_calls": [
            {"id": c["id"], "type": "function", "function": {"name": c["name"], "arguments": c["arguments"]}}
            for c in calls
        ]
        if calls
        else None,
        "tool_call_id": record.get("tool_call_id"),
        "tool_returns": [],
        "created_at": record.get("created_at"),
    }
    if record["role"] == "tool":
        written["tool_returns"] = [
            {
                "tool_call_id": record.get("tool_call_id"),
                "status": "error" if record.get("is_error") else "success",
                "func_response": content,
            }
        ]
    return written
