"""The window's budget, derived from the spec alone: the usable window and where the pressure lines fall.

Everything that draws or checks the window (the monitor, `pagemind context`, trace timelines) reads it here.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum

from pagemind.runtime.spec import AgentSpec


class Pressure(str, Enum):
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


def summary_budget(spec: AgentSpec) -> int:
    """The summary's token bound: the configured budget, scaled down for small windows."""
    return max(64, min(spec.memory.budgets.summary, usable_window(spec) // 8))


def read_pressure(total_tokens: int, correction: float, spec: AgentSpec) -> PressureReading:
    """A pure reading of the window's pressure."""
    usable = usable_window(spec)
    lines = spec.memory.pressure
    return PressureReading(
        tokens=math.ceil(total_tokens * correction), usable=usable, warn_at=int(usable * lines.warn),
        flush_at=int(usable * lines.flush), target=int(usable * lines.target),
    )
