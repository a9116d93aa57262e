"""`tool_context`: the `StepContext` a tool sees in a step, for calling tools without an agent."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime

from pagemind.blocks import CoreMemory
from pagemind.runtime.agent import StepContext
from pagemind.runtime.testing.clock import ManualClock
from pagemind.tools import ArchivalMemory, RecallMemory


def tool_context(
    agent_name: str = "tester",
    *,
    core_memory: CoreMemory | None = None,
    clock: Callable[[], datetime] | None = None,
    archival: ArchivalMemory | None = None,
    recall: RecallMemory | None = None,
) -> StepContext:
    """What a tool sees during a step (a `tools.ToolContext`), for calling tools without an agent: no core blocks
    and a `ManualClock` unless given."""
    return StepContext(
        agent_name=agent_name,
        core_memory=core_memory or CoreMemory([]),
        clock=clock or ManualClock(),
        archival=archival,
        recall=recall,
    )
