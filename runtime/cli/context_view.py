"""Drawing the context window: one bar across the usable window, a letter per section, the warn and flush lines."""

from __future__ import annotations

from typing import Any

from pagemind.runtime.budget import read_pressure, usable_window
from pagemind.runtime.compiler import CompiledContext
from pagemind.runtime.spec.agent import AgentSpec

# Section name prefix → (letter, legend). Order is the order in the bar.
SECTION_KEYS: list[tuple[str, str, str]] = [
    ("system", "S", "system"),
    ("block:", "C", "core blocks"),
    ("summary", "Y", "summary"),
    ("memory_stats", "i", "memory stats"),
    ("retrieved", "R", "retrieved"),
    ("messages", "M", "messages"),
    ("closing", "c", "closing line"),
    ("tools", "T", "tool schemas"),
    ("reply_priming", "S", "system"),
]


def grouped_sections(compiled: CompiledContext) -> dict[str, int]:
    """Section tokens grouped for display (all core blocks together), in bar order."""
    grouped: dict[str, int] = {}
    for prefix, _, legend in SECTION_KEYS:
        total = sum(
            t
            for name, t in compiled.sections.items()
            if name == prefix or (prefix.endswith(":") and name.startswith(prefix))
        )
        if total:
            grouped[legend] = grouped.get(legend, 0) + total
    return grouped


def context_report(compiled: CompiledContext, spec: AgentSpec, correction: float = 1.0) -> dict[str, Any]:
    """The numbers behind the bar, for `--json`."""
    reading = read_pressure(compiled.total_tokens, correction, spec)
    return {
        "tokens": reading.tokens,
        "usable": reading.usable,
        "context_window": spec.model.context_window,
        "warn_at": reading.warn_at,
        "flush_at": reading.flush_at,
        "target": reading.target,
        "level": reading.level.value,
        "correction": correction,
        "sections": compiled.sections,
        "grouped": grouped_sections(compiled),
    }


def render_bar(compiled: CompiledContext, spec: AgentSpec, correction: float = 1.0, width: int = 60) -> str:
    """A two-line picture of the window: the filled bar, then where the warn and flush lines sit."""
    usable = usable_window(spec)
    letters = {legend: letter for _, letter, legend in SECTION_KEYS}
    bar = ""
    for legend, tokens in grouped_sections(compiled).items():
        bar += letters[legend] * round(width * tokens * correction / usable)
    bar = (bar + "·" * width)[:width] if len(bar) <= width else bar[: width - 1] + "!"
    marks = [" "] * (width + 1)
    for fraction in (spec.memory.pressure.warn, spec.memory.pressure.flush):
        marks[min(width, round(width * fraction))] = "^"
    reading = read_pressure(compiled.total_tokens, correction, spec)
    percent = round(100 * reading.tokens / usable)
    head = f"[{bar}] {reading.tokens}/{usable} tokens ({percent}%, {reading.level.value})"
    pressure = spec.memory.pressure
    return f"{head}\n {''.join(marks)} warn {round(100 * pressure.warn)}% / flush {round(100 * pressure.flush)}%"


def render_legend(compiled: CompiledContext, spec: AgentSpec) -> str:
    """Tokens per section with its budget where one applies."""
    budgets = spec.memory.budgets
    budget_of = {
        "system": budgets.system,
        "core blocks": budgets.core,
        "summary": budgets.summary,
        "retrieved": budgets.retrieved,
    }
    letters = {legend: letter for _, letter, legend in SECTION_KEYS}
    lines = []
    for legend, tokens in grouped_sections(compiled).items():
        budget = budget_of.get(legend)
        note = f" / budget {budget}" + (" (over)" if tokens > budget else "") if budget else ""
        lines.append(f"  {letters[legend]} {legend:<14} {tokens:>7}{note}")
    return "\n".join(lines)
