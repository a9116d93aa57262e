"""What the erasure tests share: a scripted model that files what the user says everywhere an agent keeps text,
agents that use it, and the byte scan of a state folder."""

from __future__ import annotations

from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from tests.support.model_server import last_turn_message, last_user_text, model_server, tool_calls

AGENT_YAML = """
name: {name}
model: {{name: gpt-4o-mini}}
system: You keep notes.
tools: [send_message, memory_rethink, archival_memory_insert, archival_search, conversation_search]
blocks:
  - label: human
    limit: 2000
    value: ""
"""


def completion(body: dict[str, Any]) -> dict[str, Any]:
    """To a user's message: its text into the `human` block and into archival memory (two tool calls); to the
    tools' results: `send_message` repeating it. So a canary said once is in the conversation, a block, its history,
    archival memory (SQL, vector payload, embedding cache) and the trace."""
    said = last_user_text(body)
    if last_turn_message(body).get("role") == "user":
        return tool_calls(
            ("memory_rethink", {"label": "human", "new_value": f"Notes: {said}"}),
            ("archival_memory_insert", {"content": f"The user said: {said}"}),
        )
    return tool_calls(("send_message", {"message": f"echo: {said}"}))


def scripted_model() -> AbstractContextManager[str]:
    """The scripted model's base URL, served for the block."""
    return model_server(completion)


def files_holding(home: Path, canary: str) -> list[str]:
    """Every file under `home` whose bytes hold the canary (UTF-8), relative to `home`."""
    needle = canary.encode("utf-8")
    return sorted(str(p.relative_to(home)) for p in home.rglob("*") if p.is_file() and needle in p.read_bytes())
