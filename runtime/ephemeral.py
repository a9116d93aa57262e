"""Ephemeral blocks (`ephemeral: true` in the agent YAML): working notes that last one session.

At session end each is reset to its seed value from the YAML (not emptied: a structured block's seed is valid
JSON, an empty string is not). The reset is a block edit like any other, stored through the state store with
the usual compare-and-set and recorded in the block's history as operation `clear`, so it survives a restart. A
block already at its seed is left alone, which makes a second run (a daemon killed mid-job reruns it) a no-op.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import structlog

from pagemind.blocks import BlockEdit, CoreMemory
from pagemind.runtime.agent import Agent
from pagemind.runtime.state.block_edits import StaleBlocks

log = structlog.get_logger("pagemind.ephemeral")


def _clears(agent: Agent) -> list[BlockEdit]:
    seeds = {b.label: b.value for b in agent.spec.blocks if b.ephemeral}
    now = agent.now()
    return [
        BlockEdit(b.label, "clear", b.value, seeds[b.label], now)
        for b in agent.memory.blocks
        if b.label in seeds and b.value != seeds[b.label]
    ]


async def clear_ephemeral(agent: Agent) -> dict[str, Any]:
    """Reset the agent's ephemeral blocks to their seed values, durably; returns `{"job": "clear_ephemeral",
    "cleared": [labels]}`. The caller holds the agent's turn lock (the daemon's session-end job does). Safe to run
    twice: blocks already at their seed are not written again."""
    await agent.refresh()
    edits = _clears(agent)
    try:
        agent.store.commit_edits(agent.record.id, edits, agent.window.block_versions)
    except StaleBlocks:  # edited elsewhere since this agent read them: read them again and clear what is there
        blocks, agent.window.block_versions = agent.store.load_core(agent.record.id, agent.spec)
        agent.memory = CoreMemory(blocks)
        edits = _clears(agent)
        agent.store.commit_edits(agent.record.id, edits, agent.window.block_versions)
    cleared = {e.label: e.new_value for e in edits}
    agent.memory.blocks[:] = [
        replace(b, value=cleared[b.label]) if b.label in cleared else b for b in agent.memory.blocks
    ]
    log.info("ephemeral_cleared", agent=agent.name, labels=sorted(cleared))
    return {"job": "clear_ephemeral", "cleared": sorted(cleared)}
