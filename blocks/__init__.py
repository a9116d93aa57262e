"""Core memory: the block model, limits and edit operations."""

from pagemind.blocks.block import Block, BlockEdit, BlockEditError, CoreMemory

__all__ = ["Block", "BlockEdit", "BlockEditError", "CoreMemory"]
