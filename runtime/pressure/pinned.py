"""The pinned part of the prompt: what no eviction can shrink (instructions, core blocks, tool schemas, the
closing line), and the check that it fits below the flush line, else no flush could ever make room.
"""

from __future__ import annotations

from pagemind.runtime.budget import usable_window
from pagemind.runtime.compiler import CompiledContext
from pagemind.runtime.model.client import ModelError
from pagemind.runtime.spec.agent import AgentSpec

PINNED_SECTIONS = ("system", "tools", "closing", "reply_priming")


class ContextOverflow(ModelError):
    """The pinned part of the prompt alone does not fit the window; the message names each part and its size."""


def pinned_tokens(compiled: CompiledContext) -> dict[str, int]:
    """The parts of the prompt no eviction can shrink: instructions, core blocks, tool schemas, closing line."""
    return {
        name: tokens
        for name, tokens in compiled.sections.items()
        if name in PINNED_SECTIONS or name.startswith("block:")
    }


def check_pinned_fits(compiled: CompiledContext, spec: AgentSpec) -> None:
    """Raise ContextOverflow, naming every pinned part and its size, if they alone exceed the flush line."""
    pinned = pinned_tokens(compiled)
    limit = int(usable_window(spec) * spec.memory.pressure.flush)
    if sum(pinned.values()) <= limit:
        return
    parts = ", ".join(f"{name} {tokens}" for name, tokens in sorted(pinned.items(), key=lambda kv: -kv[1]))
    raise ContextOverflow(
        f"the pinned part of the prompt needs {sum(pinned.values())} tokens but only {limit} fit below the flush "
        f"line (context_window {spec.model.context_window}, output reserve "
        f"{spec.model.context_window - usable_window(spec)}). Parts: {parts}. Shrink a core block, drop tools, "
        "or raise model.context_window; the agent's state is unchanged."
    )
