"""The report of bench.lifecycle: which parts of issue 13 the run found, and its measures as a Markdown section
for bench/RESULTS.md, one column per run ("reflection off", "reflection on")."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from typing import Any

from bench.lifecycle_data import History
from bench.lifecycle_models import SALIENCE_MODEL


def availability(steps: dict[str, Any], scores: dict[str, dict[str, Any]]) -> list[str]:
    """A line per part of issue 13: available or not, as this run could tell."""
    lines = [
        f"{part}: {'available' if step else 'not available'}"
        + (f" (`{step.__module__}.{step.__name__}`)" if step else "")
        for part, step in steps.items()
    ]
    salience = any(s["salience_calls_per_100"] for s in scores.values())
    from pagemind.runtime.spec.memory import MemoryConfig

    has_config = hasattr(MemoryConfig, "salience")  # `memory.advanced.salience`, read as `memory.salience`
    lines.append(
        "salience: "
        + (
            f"available (small model `{SALIENCE_MODEL}` asked when the rules are unsure)"
            if has_config
            else "not available"
        )
        + ("" if salience else " (no salience model call was made)")
    )
    dated = max((s["plans_with_expiry"] for s in scores.values()), default=0)
    lines.append(
        "expiry: "
        + (f"{dated} plan memories got `expires_at`" if dated else "not available (no plan memory got `expires_at`)")
    )
    return lines


def table(history: History, scores: dict[str, dict[str, Any]]) -> str:
    """The results as a Markdown table, one column per run."""
    labels = list(scores)
    rows: list[tuple[str, Callable[[dict[str, Any]], str]]] = []
    for day in sorted({d for s in scores.values() for d in s["tokens_by_day"]}):
        rows.append(
            (
                f"prompt tokens per turn, day {day} (mean, steps summed)",
                lambda s, d=day: f"{s['tokens_by_day'].get(d, float('nan')):.0f}",
            )
        )
    rows += [
        ("prompt tokens per turn, largest day mean", lambda s: f"{s['tokens_max_day']:.0f}"),
        (
            "live archival memories (by kind)",
            lambda s: f"{s['live']} ({', '.join(f'{k} {n}' for k, n in s['live_by_kind'].items())})",
        ),
        (
            "planted contradictions still both live (target 0 with reflection)",
            lambda s: f"{s['contradictions_live']} of {s['corrections']}",
        ),
        (
            "planted facts, latest version in archival_search top 5 (target ≥ 95 %)",
            lambda s: f"{s['facts_found']} of {s['facts']} ({s['facts_found'] / max(1, s['facts']):.0%})",
        ),
        (
            "corrected facts whose stale version ranks above the latest in that top 5",
            lambda s: f"{s['stale_first']} of {s['corrected_facts']}",
        ),
        (
            "expired plans still in default results (target 0)",
            lambda s: (
                f"{s['expired_plans_shown']} of {s['expired_plans']}"
                + (f" (+{n} found only in an episode)" if (n := s["expired_plans_in_episodes"]) else "")
            ),
        ),
        ("model calls for reflection per 100 turns", lambda s: f"{s['reflection_calls_per_100']:.1f}"),
        (
            "model calls for salience per 100 turns (of which on chit-chat)",
            lambda s: f"{s['salience_calls_per_100']:.1f} ({s['salience_chat_calls_per_100']:.1f})",
        ),
        (
            "all model calls per 100 turns, by purpose",
            lambda s: ", ".join(f"{p} {n}" for p, n in s["calls_per_100"].items()),
        ),
        (
            "session-end results (part: status × days)",
            lambda s: (
                "; ".join(
                    f"{part}: " + ", ".join(f"{k} {n}" for k, n in counts.items())
                    for part, counts in s["session_status"].items()
                )
                or "none run"
            ),
        ),
        ("wall time, s", lambda s: f"{s['seconds']:.0f}"),
    ]
    head = "| measure | " + " | ".join(labels) + " |\n| --- |" + " --- |" * len(labels)
    return (
        head
        + "\n"
        + "\n".join(f"| {name} | " + " | ".join(cell(scores[x]) for x in labels) + " |" for name, cell in rows)
    )


def _first(items: list[str], count: int = 4) -> str:
    """The first few items, and how many more."""
    more = f" and {len(items) - count} more" if len(items) > count else ""
    return ", ".join(items[:count]) + more if items else "none"


def report(history: History, scores: dict[str, dict[str, Any]], steps: dict[str, Any], note: str) -> str:
    """The section written to bench/RESULTS.md."""
    errors = [f"{label}: {e}" for label, s in scores.items() for e in s["session_errors"][:3]]
    turns = [t.text for d in history.days for t in d.turns]
    chinese = sum(1 for t in turns if re.search(r"[\u4e00-\u9fff]", t)) / max(1, len(turns))
    missed = "; ".join(f"{label}: {', '.join(s['facts_missed']) or 'none'}" for label, s in scores.items())
    shown = "; ".join(f"{label}: {_first(s['expired_plans_listed'])}" for label, s in scores.items())
    seconds = sum(s["seconds"] for s in scores.values())
    skipped = (
        ""
        if any(steps.values())
        else (
            ' "On" was not run: no session-end part (episodes, profile, '
            'reflection) exists in this checkout, so it would repeat "off".'
        )
    )
    return f"""
{note}; load average {os.getloadavg()[0]:.2f} at the end (other helpers' work was running). Seed
{history.seed}, {len(history.days)} days × {history.turns_per_day} user turns ({history.turn_count} turns,
{chinese:.0%} of them in Chinese), {len(history.facts)} planted facts, {len(history.corrections)} corrections,
{len(history.plans)} time-bound plans. The shipped companion agent (16k window), SQLite and Qdrant Edge in a temp
folder, the shipped embedder, a ManualClock moved turn by turn.

**The models are scripts** (bench.lifecycle_models), reading only their requests: the companion files a
message that states a fact or plan with `archival_memory_insert` (third person; kind todo when it names a time)
and otherwise replies; the reflector merges near-duplicate texts and, for two memories on the same subject by a
keyword table, lets the newer win; it marks todos whose written date has passed done; it writes no insights and
no profile. "on" runs the session-end steps once per simulated day; "off" runs none.{skipped} The runs took
{seconds:.0f} s together ({history.turns_per_day} turns a day keeps a full run well under 5 minutes on this loaded
2-core machine; `--turns-per-day` changes it).

Parts of issue 13 in this checkout: {"; ".join(availability(steps, scores))}.
{("Session-end errors: " + "; ".join(errors)) if errors else ""}

{table(history, scores)}

Planted facts whose latest version was not in the top 5 — {missed}. Expired plans still in default results —
{shown}.
"""
