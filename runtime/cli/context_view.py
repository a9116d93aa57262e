"""Drawing the context window: one bar across the usable window, a letter per section, the warn and flush lines."""

from __future__ import annotations

from typing import Any

from pagemind.runtime.budget import read_pressure, usable_window
from pagemind.runtime.compiler import CompiledContext
from pagemind.runtime.spec.agent import AgentSpec
from pagemind.runtime.spec.prices import ModelPrices
from pagemind.runtime.state.records import UsageTotals

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


def usage_report(totals: UsageTotals, prices: ModelPrices | None) -> dict[str, Any]:
    """Token use summed over steps, with the prompt cache's share and, given prices, the estimated cost in dollars:
    the numbers `pagemind context --json` and the API's usage route give."""
    cost = prices.cost(totals.prompt_tokens, totals.cached_tokens, totals.completion_tokens) if prices else None
    return {
        "steps": totals.steps,
        "prompt_tokens": totals.prompt_tokens,
        "cached_tokens": totals.cached_tokens,
        "completion_tokens": totals.completion_tokens,
        "steps_reporting_cache": totals.steps_reporting_cache,
        "cached_share": totals.cached_share,
        "cost_usd": None if cost is None else round(cost, 6),
    }


def usage_line(totals: UsageTotals, prices: ModelPrices | None, counted: str = "steps") -> str:
    """One line of token use: steps (or what `counted` names), prompt tokens and how many the provider's prompt
    cache served, completion tokens, and the estimated cost when the agent's YAML gives `model.prices`."""
    if not totals.steps:
        return f"usage: no {counted} yet"
    if totals.steps_reporting_cache:
        share = totals.cached_share or 0.0
        cache = f" ({totals.cached_tokens:,} from the prompt cache, {share:.0%})"
    else:
        cache = " (the provider reported no prompt-cache use)"
    line = (
        f"usage: {totals.steps:,} {counted}, {totals.prompt_tokens:,} prompt tokens{cache}, "
        f"{totals.completion_tokens:,} completion tokens"
    )
    if prices is not None:
        line += f"; about ${prices.cost(totals.prompt_tokens, totals.cached_tokens, totals.completion_tokens):,.4f}"
    return line
