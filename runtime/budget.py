"""The window's budget, derived from the spec alone: the usable window and where the pressure lines fall.

Everything that draws or checks the window (the monitor, `pagemind context`, trace timelines) reads it here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import StrEnum

from pagemind.runtime.spec.agent import AgentSpec


class Pressure(StrEnum):
    """Where the window stands against its lines."""

    OK = "ok"
    WARN = "warn"
    FLUSH = "flush"


@dataclass(frozen=True)
class PressureReading:
    """Tokens in use (corrected toward what the provider counts) against the lines, in tokens."""

    tokens: int
    usable: int
    warn_at: int
    flush_at: int
    target: int

    @property
    def level(self) -> Pressure:
        """OK, WARN or FLUSH."""
        if self.tokens >= self.flush_at:
            return Pressure.FLUSH
        return Pressure.WARN if self.tokens >= self.warn_at else Pressure.OK


def usable_window(spec: AgentSpec) -> int:
    """`context_window − output reserve`: what the prompt may use."""
    reserve = spec.memory.budgets.output_reserve or spec.model.max_output_tokens
    return spec.model.context_window - reserve


MIN_REPLY_TOKENS = 256
"""The smallest reply a squeezed window still leaves room for (see `Squeeze`)."""


def max_message_tokens(spec: AgentSpec) -> int:
    """A single message larger than this is clipped in the prompt (never in storage)."""
    return usable_window(spec) // 4


def max_reply_tokens(spec: AgentSpec, prompt_tokens: int) -> int:
    """The `max_tokens` to ask for with a prompt of `prompt_tokens`: the configured output reserve, or less when a
    squeezed window has grown into it (never below `MIN_REPLY_TOKENS`)."""
    room = spec.model.context_window - prompt_tokens
    return min(spec.model.max_output_tokens, max(MIN_REPLY_TOKENS, room))


def summary_budget(spec: AgentSpec) -> int:
    """The summary's token bound: the configured budget, scaled down for small windows."""
    return max(64, min(spec.memory.budgets.summary, usable_window(spec) // 8))


@dataclass(frozen=True)
class Squeeze:
    """How much room a flush could buy: the window's `floor` is what no eviction removes (the pinned part, memory
    statistics, retrieved memories, the summary and the newest message group), in corrected tokens.

    A flush that can only bring the window to within `room < needed` tokens of the flush line would buy a turn
    or two and then run again, two extra model calls each time. Such a window is *squeezed*: it flushes at the
    hard line instead (the context window less a minimal reply), growing into the output reserve first.
    """

    floor: int
    room: int
    needed: int
    hard_at: int

    @property
    def squeezed(self) -> bool:
        """Whether a flush at the flush line would leave less room than several turns need."""
        return self.room < self.needed


def squeeze(reading: PressureReading, floor: int, spec: AgentSpec) -> Squeeze:
    """The room a flush could buy from `reading` when `floor` tokens cannot be evicted; several turns need half
    the normal swing from the flush line down to the target."""
    hard_at = spec.model.context_window - min(MIN_REPLY_TOKENS, spec.model.max_output_tokens)
    return Squeeze(
        floor=floor,
        room=reading.flush_at - floor,
        needed=(reading.flush_at - reading.target) // 2,
        hard_at=max(reading.flush_at, hard_at),
    )


def read_pressure(total_tokens: int, correction: float, spec: AgentSpec) -> PressureReading:
    """A pure reading of the window's pressure."""
    usable = usable_window(spec)
    lines = spec.memory.pressure
    return PressureReading(
        tokens=math.ceil(total_tokens * correction),
        usable=usable,
        warn_at=int(usable * lines.warn),
        flush_at=int(usable * lines.flush),
        target=int(usable * lines.target),
    )
