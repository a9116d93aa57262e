"""Core memory: the block model, limits and edit operations, and structured (schema'd) blocks."""

from pagemind.blocks.block import Block, BlockEdit, CoreMemory, updated_value
from pagemind.blocks.errors import BlockEditError
from pagemind.blocks.schema import BlockSchema
from pagemind.blocks.structured import checked_json, compact_view, dump_json, merge_patch

__all__ = [
    "Block",
    "BlockEdit",
    "BlockEditError",
    "BlockSchema",
    "CoreMemory",
    "checked_json",
    "compact_view",
    "dump_json",
    "merge_patch",
    "updated_value",
]
