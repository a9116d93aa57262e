"""Shared by the daemon tests and their child processes: an agents folder, a model whose answers are a function
of the request alone (so a turn resumed in another process gets the same answers), and a daemon over a URL.

The ledger model: for a user message `msg N` the first step appends `[N]` to the `human` block and the second
answers `ack N` with send_message. A turn run twice would append `[N]` twice; a turn lost would leave it out.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path
from typing import Any

import yaml

from pagemind.runtime.model.client import ModelRequest
from pagemind.runtime.testing.models import FunctionModel, by_purpose
from pagemind.runtime.testing.responses import tool_call_body
from pagemind.runtime.testing.specs import spec_data

TEMPLATE = "companion"


def write_agents(folder: Path, yaml_agents: tuple[str, ...] = ("alice",), **options: Any) -> Path:
    """An agents folder: one YAML per name in `yaml_agents` and a template called `companion`."""
    folder.mkdir(parents=True, exist_ok=True)
    fields = {"human_limit": 2000, "context_window": 16000, **options}
    for name in yaml_agents:
        (folder / f"{name}.yaml").write_text(yaml.safe_dump(spec_data(name, **fields)))
    (folder / f"{TEMPLATE}.yaml").write_text(yaml.safe_dump({**spec_data(TEMPLATE, **fields), "template": True}))
    return folder


def ledger_step(request: ModelRequest) -> dict[str, Any]:
    """The agent's step for the ledger model (see the module docstring)."""
    messages = request.messages
    last_user = max(i for i, m in enumerate(messages) if m["role"] == "user")
    text = messages[last_user]["content"]
    number = re.search(r"(\d+)", text)
    marker = number.group(1) if number else text
    appended = any(m["role"] == "tool" for m in messages[last_user + 1 :])
    if not appended:
        return tool_call_body(
            "core_memory_append", {"label": "human", "content": f"[{marker}]"}, call_id=f"call_append_{marker}"
        )
    return tool_call_body("send_message", {"message": f"ack {marker}"}, call_id=f"call_send_{marker}")


def ledger_model() -> FunctionModel:
    """A FunctionModel answering with `ledger_step` (and the runtime's own summaries and extractions)."""
    return FunctionModel(by_purpose(ledger_step))


def markers(human: str) -> list[str]:
    """The `[N]` markers in a human block, in order."""
    return re.findall(r"\[(\d+)\]", human)


def dump(value: Any) -> str:
    """JSON for a child's command line."""
    return json.dumps(value)


def wait_until(check: Any, what: str, deadline_s: float = 60.0) -> Any:
    """Poll `check` (another process's state: nothing in this process can signal it) until it returns something
    truthy, or fail naming `what`."""
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        result = check()
        if result:
            return result
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")
