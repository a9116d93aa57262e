"""Core memory blocks: the pinned, size-limited sections of every prompt, and the edits the model may make."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from pagemind.blocks.errors import BlockEditError
from pagemind.blocks.schema import BlockSchema
from pagemind.blocks.structured import checked_json, patched_json


@dataclass(frozen=True)
class Block:
    """One labelled core-memory block as it stands now."""

    label: str
    value: str
    limit: int
    description: str = ""
    read_only: bool = False
    schema: BlockSchema | None = None  # a structured block: its value is JSON that must match this
    ephemeral: bool = False  # working notes, reset to the seed value when a session ends

    @property
    def chars(self) -> int:
        """Characters used, the unit the limit is counted in."""
        return len(self.value)


@dataclass(frozen=True)
class BlockEdit:
    """One applied edit: the version history keeps every one of these."""

    label: str
    operation: str
    old_value: str
    new_value: str
    at: datetime


def _checked(block: Block, new_value: str) -> str:
    """`new_value` as the block will store it; raises BlockEditError if the block cannot take it."""
    if block.read_only:
        raise BlockEditError(f"Block '{block.label}' is read-only; it cannot be edited.")
    if block.schema is not None:
        new_value = checked_json(block.label, block.schema, new_value)
    if len(new_value) > block.limit:
        raise BlockEditError(
            f"Edit refused: block '{block.label}' would hold {len(new_value)} characters but its limit is "
            f"{block.limit} (it holds {block.chars} now). Shorten the text by at least "
            f"{len(new_value) - block.limit} characters, or move detail to archival memory, and try again."
        )
    return new_value


def _occurrence_lines(value: str, needle: str) -> list[int]:
    lines: list[int] = []
    start = value.find(needle)
    while start != -1:
        lines.append(value.count("\n", 0, start) + 1)
        start = value.find(needle, start + 1)
    return lines


def appended_value(block: Block, content: str) -> str:
    """The value after appending `content` on a new line; raises BlockEditError if not allowed."""
    if not content:
        raise BlockEditError("Nothing to append: content is empty.")
    if block.schema is not None and block.value:
        raise BlockEditError(
            f"Block '{block.label}' is structured (JSON with fixed fields): appending text would "
            "break it. Use core_memory_update to set or add fields."
        )
    new_value = f"{block.value}\n{content}" if block.value else content
    return _checked(block, new_value)


def replaced_value(block: Block, old_content: str, new_content: str) -> str:
    """The value after replacing the single occurrence of `old_content`; raises BlockEditError otherwise."""
    if not old_content:
        raise BlockEditError("old_content is empty; quote the exact text to replace (use memory_rethink to rewrite).")
    lines = _occurrence_lines(block.value, old_content)
    if not lines:
        raise BlockEditError(
            f"old_content not found in block '{block.label}'. It must match the block's text exactly; "
            f"the block currently reads:\n{block.value}"
        )
    if len(lines) > 1:
        where = ", ".join(str(n) for n in lines)
        raise BlockEditError(
            f"old_content occurs {len(lines)} times in block '{block.label}' (lines {where}); "
            "include more surrounding text so it matches exactly once."
        )
    return _checked(block, block.value.replace(old_content, new_content, 1))


def rethought_value(block: Block, new_value: str) -> str:
    """The value after rewriting the whole block; raises BlockEditError if not allowed."""
    return _checked(block, new_value)


def updated_value(block: Block, changes: dict[str, Any]) -> str:
    """The value of a structured block after applying `changes` as an RFC 7386 JSON merge patch (a key set to
    null is removed; objects merge; lists and other values replace). Raises BlockEditError naming the field that
    would break the schema, or when the block is read-only, over its limit or not structured."""
    if block.schema is None:
        raise BlockEditError(
            f"Block '{block.label}' is plain text, not structured; edit it with "
            "core_memory_append, core_memory_replace or memory_rethink."
        )
    if block.read_only:
        raise BlockEditError(f"Block '{block.label}' is read-only; it cannot be edited.")
    return _checked(block, patched_json(block.label, block.value, changes))


@dataclass
class CoreMemory:
    """The agent's blocks in prompt order, plus the edits made since the last commit.

    Edits are applied to this working copy and collected in `pending`; the runtime writes them in the same
    transaction as the step that made them, then calls `clear_pending()`.
    """

    blocks: list[Block]
    pending: list[BlockEdit] = field(default_factory=list)

    def get(self, label: str) -> Block:
        """The block with this label; raises BlockEditError naming the labels that exist."""
        for block in self.blocks:
            if block.label == label:
                return block
        known = ", ".join(b.label for b in self.blocks) or "none"
        raise BlockEditError(f"No block labelled '{label}'. Blocks: {known}.")

    def labels(self) -> list[str]:
        """Labels in prompt order."""
        return [b.label for b in self.blocks]

    def _apply(self, label: str, operation: str, new_value: str, at: datetime) -> Block:
        index = self.labels().index(label)
        old = self.blocks[index]
        updated = replace(old, value=new_value)
        self.blocks[index] = updated
        self.pending.append(BlockEdit(label, operation, old.value, new_value, at))
        return updated

    def append(self, label: str, content: str, at: datetime) -> Block:
        """Append a line to a block."""
        return self._apply(label, "append", appended_value(self.get(label), content), at)

    def replace(self, label: str, old_content: str, new_content: str, at: datetime) -> Block:
        """Replace the one occurrence of old_content in a block."""
        return self._apply(label, "replace", replaced_value(self.get(label), old_content, new_content), at)

    def rethink(self, label: str, new_value: str, at: datetime) -> Block:
        """Rewrite a block whole."""
        return self._apply(label, "rethink", rethought_value(self.get(label), new_value), at)

    def update(self, label: str, changes: dict[str, Any], at: datetime) -> Block:
        """Merge `changes` (an RFC 7386 JSON merge patch) into a structured block."""
        return self._apply(label, "update", updated_value(self.get(label), changes), at)

    def forget(self, label: str, new_value: str, at: datetime) -> Block:
        """Rewrite a block without what the user asked to forget (operation `forget`; the limit cannot be crossed
        by removing)."""
        return self._apply(label, "forget", new_value, at)

    def clear_pending(self) -> list[BlockEdit]:
        """Hand over the edits made since the last commit and forget them."""
        edits, self.pending = self.pending, []
        return edits

    def copy(self) -> CoreMemory:
        """An independent working copy (blocks are immutable, so a shallow list copy suffices)."""
        return CoreMemory(list(self.blocks), list(self.pending))
