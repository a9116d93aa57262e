"""The profile half of a reflection: an RFC 7386 JSON merge patch applied to the profile block's JSON value (checked
against the block's schema by the blocks layer), written through the same store write as core-memory edits (a block
version, compare-and-set on the block's version).

The edit's operation is `reflection <id>`, so `pagemind memory AGENT --history` names the reflection, and a rerun
after a crash sees that the patch is in and does not apply it again over later edits.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import structlog

from pagemind.blocks import BlockEdit, BlockEditError, dump_json, merge_patch, updated_value
from pagemind.blocks.block import rethought_value
from pagemind.runtime.agent import Agent
from pagemind.runtime.reflection.request import profile_of

log = structlog.get_logger("pagemind.reflection")


def patched_value(agent: Agent, label: str, patch: dict[str, Any]) -> str | None:
    """The profile block's value after the patch (None when it changes nothing); raises BlockEditError naming
    what is wrong: no such block, a field the block's schema refuses, read-only, over the limit. A structured
    block is patched by the blocks layer's own merge (`updated_value`, as `core_memory_update` does); a plain
    block must hold a JSON object, merged the same way."""
    block, profile = profile_of(agent, label)
    if block is None:
        raise BlockEditError(f"the agent has no profile block '{label}' to patch")
    if block.schema is not None:
        value = updated_value(block, patch)
    elif profile is None:
        raise BlockEditError(f"block '{label}' does not hold a JSON object; a merge patch cannot apply")
    else:
        value = rethought_value(block, dump_json(merge_patch(profile, patch)))
    return None if value == block.value or (profile is not None and json.loads(value) == profile) else value


def apply_profile_patch(agent: Agent, label: str, patch: dict[str, Any], reflection_id: str) -> bool:
    """Apply the patch as reflection `reflection_id`'s edit of the block; False when it changes nothing or that
    reflection's edit is already stored. Raises BlockEditError as `patched_value` does, or StaleBlocks when
    another process moved the block meanwhile."""
    operation = f"reflection {reflection_id}"
    if any(v.operation == operation for v in agent.store.block_history(agent.record.id, label)):
        return False  # applied before a crash: applying it again could undo later edits
    value = patched_value(agent, label, patch)
    if value is None:
        return False
    index = agent.memory.labels().index(label)
    block = agent.memory.blocks[index]
    edit = BlockEdit(label, operation, block.value, value, agent.clock())
    agent.store.commit_edits(agent.record.id, [edit], agent.window.block_versions)
    agent.memory.blocks[index] = dataclasses.replace(block, value=value)
    log.info("reflection_profile_patched", agent=agent.name, label=label, chars=len(value), fields=sorted(patch))
    return True
