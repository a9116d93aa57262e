"""A custom tool that never finishes, for the turn deadline's hold on tool calls."""

from __future__ import annotations

import asyncio


async def wait_for_approval(request: str) -> str:
    """Wait for a human to approve `request` (in these tests, no one ever does)."""
    await asyncio.Event().wait()
    return "approved"
