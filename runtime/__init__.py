"""The pagemind kernel: `from pagemind.runtime import Agent`.

    agent = await Agent.load("agents/companion.yaml")
    reply = await agent.send("Hi, I'm Lin.")

The names below load on first use, so importing a submodule (say, for the CLI's `--help`) stays cheap.
"""

from __future__ import annotations

import importlib
from typing import Any

_EXPORTS = {
    "Agent": "pagemind.runtime.agent",
    "AgentSpec": "pagemind.runtime.spec.agent",
    "load_spec": "pagemind.runtime.spec.loading",
    "Settings": "pagemind.runtime.process.settings",
    "TurnResult": "pagemind.runtime.turn_outcomes",
    "StopReason": "pagemind.runtime.turn_outcomes",
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> Any:
    """Import an exported name from its module the first time it is asked for."""
    if name not in _EXPORTS:
        raise AttributeError(f"module 'pagemind.runtime' has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
