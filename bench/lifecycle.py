"""The memory lifecycle over a synthetic 90-day companion history (issue 13), with reflection on and off.

A seeded history (bench/lifecycle_data.py: daily chit-chat in English and Chinese, planted facts, later
corrections of some, time-bound plans) is fed turn by turn to the shipped companion agent (SQLite and Qdrant Edge
in a temp folder, the shipped embedder) under a ManualClock, with scripted models (bench/lifecycle_models.py): a
companion that files what a message states and a reflector that applies simple rules; neither reads the ground
truth. "On" runs the session-end steps once a simulated day (episodes' `end_session`, the profile's
`clear_ephemeral`, then `reflect`), each only where its part exists; "off" runs none. Salience and expiry live
in the runtime and act in both runs when they exist.

Reported, into bench/RESULTS.md: prompt tokens per turn on days 1, 30 and 90; live archival memories; planted
contradictions still both live (target 0 with reflection on); planted facts whose latest version
`archival_search` finds in the top 5 (target ≥ 95 %); expired plans still in default results (target 0); model
calls for reflection and salience per 100 turns; wall time.

    python bench/lifecycle.py [--seed 7] [--days 90] [--turns-per-day 12] [--mode both|on|off]
    python bench/lifecycle.py --quick        # 10 days, results printed, RESULTS.md left alone
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import inspect
import json
import os
import pkgutil
import re
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any, Awaitable, Callable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import machine_note, write_section  # noqa: E402
from bench.lifecycle_data import Day, History, generate  # noqa: E402
from bench.lifecycle_models import calls_by_purpose, respond  # noqa: E402
from bench.long_conversation import request_size  # noqa: E402
from pagemind.runtime.agent import Agent  # noqa: E402
from pagemind.runtime.memory.records import MemoryRecord  # noqa: E402
from pagemind.runtime.model_client import ModelRequest  # noqa: E402
from pagemind.runtime.settings import Settings  # noqa: E402
from pagemind.runtime.spec import AgentSpec, load_spec  # noqa: E402
from pagemind.runtime.state.store import StateStore  # noqa: E402
from pagemind.runtime.testing import FunctionModel, ManualClock  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
REPORT_DAYS = (1, 30, 90)
# "On Monday she said she lived in Osaka" stays true: an episode is neither a stale fact nor a live plan, nor
# the memory that states a fact.
RECORDS_OF_THE_PAST = ("episode",)
SessionStep = Callable[[Agent], Awaitable[Any]]

# -- the other parts of issue 13, found through their contracts -------------------------------------------------

# part: (public function, modules to try first, words a module name must contain to be searched)
PARTS: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    "episodes": ("end_session", ("pagemind.runtime.episodes", "pagemind.runtime.memory.episodes"),
                 ("episode", "session", "fading")),
    "profile": ("clear_ephemeral", ("pagemind.runtime.ephemeral", "pagemind.runtime.profile"),
                ("ephemeral", "profile", "session")),
    "reflection": ("reflect", ("pagemind.runtime.reflection.run", "pagemind.runtime.reflection"), ("reflect",)),
}
SESSION_END_ORDER = ("episodes", "profile", "reflection")  # the contract's order


def _found(module_name: str, function: str) -> SessionStep | None:
    try:
        module = importlib.import_module(module_name)
    except ImportError:
        return None
    candidate = getattr(module, function, None)
    return candidate if inspect.iscoroutinefunction(candidate) else None


def find_part(function: str, modules: tuple[str, ...], words: tuple[str, ...]) -> SessionStep | None:
    """The async `function` of a part: from the expected modules, else from any pagemind module whose name holds
    one of `words` (the part may have landed under another name)."""
    for name in modules:
        if (step := _found(name, function)) is not None:
            return step
    import pagemind

    for info in pkgutil.walk_packages(pagemind.__path__, "pagemind.", onerror=lambda _: None):
        leaf = info.name.rsplit(".", 1)[-1]
        if any(word in leaf for word in words) and (step := _found(info.name, function)) is not None:
            return step
    return None


def session_end_steps() -> dict[str, SessionStep | None]:
    """Each session-end part: its function, or None when it is not available in this checkout."""
    return {part: find_part(*PARTS[part]) for part in SESSION_END_ORDER}


# -- a run ------------------------------------------------------------------------------------------------------


@dataclass
class Run:
    """One simulated history: what it cost and the agent at its end (scored afterwards)."""

    label: str
    agent: Agent
    model: FunctionModel
    turns: int
    tokens_by_day: dict[int, list[int]] = field(default_factory=dict)  # prompt tokens of each turn, steps summed
    session_errors: list[str] = field(default_factory=list)
    session_status: dict[str, Counter[str]] = field(default_factory=dict)  # part → its results' `status` values
    seconds: float = 0.0


SALIENCE_MODEL = "scripted-small"


def bench_spec() -> AgentSpec:
    """The shipped companion agent, under the benchmark's name; where the salience gate can ask a small model
    (`memory.salience.model`), it does (the scripted one), so its calls are counted."""
    data = load_spec(ROOT / "agents/companion.yaml").model_dump()
    salience = data["memory"].get("salience")
    if isinstance(salience, dict) and "model" in salience and salience["model"] is None:
        salience["model"] = SALIENCE_MODEL
    return AgentSpec.model_validate({**data, "name": "lifecycle"})


async def end_session(agent: Agent, steps: dict[str, SessionStep | None], run: Run) -> None:
    """The session-end steps that exist, in the contract's order, each result's `status` counted; a failing one
    is noted and the rest still run."""
    for part, step in steps.items():
        if step is None:
            continue
        counts = run.session_status.setdefault(part, Counter())
        try:
            result = await step(agent)
        except Exception as exc:  # a part's bug must not end the benchmark; it is reported
            run.session_errors.append(f"{part}: {type(exc).__name__}: {str(exc)[:120]}")
            counts["raised"] += 1
            continue
        counts[str(result.get("status", "ok")) if isinstance(result, dict) else "ok"] += 1


async def simulate(history: History, home: Path, label: str, steps: dict[str, SessionStep | None]) -> Run:
    """Feed every day's turns to a fresh companion agent under `home`; the session-end `steps` after each day."""
    started = time.perf_counter()
    settings = Settings(home=home, database_url=f"sqlite:///{home / 'pagemind.db'}")
    clock = ManualClock(history.days[0].turns[0].at)
    model = FunctionModel(respond)
    agent = await Agent.load(bench_spec(), model=model, settings=settings,
                             store=StateStore.open(settings.database_url), clock=clock)
    run = Run(label, agent, model, history.turn_count)
    for day in history.days:
        for turn in day.turns:
            clock.now = turn.at
            first = len(model.requests)
            await agent.send(turn.text)
            tokens = sum(request_size(r) for r in model.requests[first:] if r.purpose == "step")
            run.tokens_by_day.setdefault(day.number, []).append(tokens)
        clock.now = day.session_end
        await end_session(agent, steps, run)
    clock.now = history.days[-1].session_end + timedelta(minutes=30)
    run.seconds = time.perf_counter() - started
    return run


# -- scoring ----------------------------------------------------------------------------------------------------


def mentions(text: str, value: str) -> bool:
    """Whether a memory's text names a value (a whole word for Latin script, a substring for Chinese)."""
    if not value.isascii():
        return value in text
    return re.search(rf"(?<!\w){re.escape(value)}(?!\w)", text, re.I) is not None


def asserted(text: str, values: list[str]) -> str | None:
    """The value a memory states among a fact's successive values: the latest one it names ("tacos, not pho"
    states tacos)."""
    named = [v for v in values if mentions(text, v)]
    return named[-1] if named else None


def turn_text(request: ModelRequest) -> str:
    """The user's words a salience request asks about (its JSON `{"user": …}`), or ""."""
    try:
        payload = json.loads(request.messages[-1].get("content") or "")
    except (ValueError, TypeError):
        return ""
    return str(payload.get("user", "")) if isinstance(payload, dict) else ""


def live_records(run: Run, now: datetime) -> list[MemoryRecord]:
    """The agent's live archival memories now: neither superseded nor expired."""
    return [r for r in run.agent.archival.list() if r.expires_at is None or r.expires_at > now]


async def score(run: Run, history: History) -> dict[str, Any]:
    """Every reported measure of one run, computed at the end of its last day."""
    archival, now = run.agent.archival, run.agent.now()
    live = live_records(run, now)
    both_live = 0
    statements = [r for r in live if r.kind not in RECORDS_OF_THE_PAST]
    for c in history.corrections:
        values = [v for _, v in history.facts[c.slot].values]
        states = {asserted(r.text, values) for r in statements}
        both_live += c.old in states and c.new in states
    missed = []
    for fact in history.facts.values():
        hits = await archival.search(fact.question, top_k=5, count_hits=False)
        if not any(mentions(h.text, fact.latest) for h in hits if h.kind not in RECORDS_OF_THE_PAST):
            missed.append(f"{fact.slot} ({fact.latest})")
    expired = [p for p in history.plans if p.ends < now.date()]
    shown, in_episodes = [], 0
    for plan in expired:
        hits = [h for h in await archival.search(plan.query, top_k=5, count_hits=False) if mentions(h.text, plan.marker)]
        if any(h.kind not in RECORDS_OF_THE_PAST for h in hits):
            shown.append(f"“{plan.text}” (day {plan.day})")
        in_episodes += bool(hits) and all(h.kind in RECORDS_OF_THE_PAST for h in hits)
    dated = sum(1 for p in history.plans for r in run.agent.archival.list(include_superseded=True)
                if mentions(r.text, p.marker) and r.expires_at is not None)
    calls = calls_by_purpose(run.model.requests)
    chat_texts = {t.text for d in history.days for t in d.turns if t.kind == "chat"}
    on_chat = sum(1 for r in run.model.requests if "salien" in r.purpose and turn_text(r) in chat_texts)
    per_100 = 100 / max(1, run.turns)
    tokens = {d: sum(v) / len(v) for d in REPORT_DAYS + (len(history.days),)
              if (v := run.tokens_by_day.get(d))}
    return {
        "turns": run.turns, "tokens_by_day": tokens,
        "tokens_max_day": max(sum(v) / len(v) for v in run.tokens_by_day.values()), "live": len(live),
        "live_by_kind": dict(sorted({k: sum(1 for r in live if r.kind == k) for k in {r.kind for r in live}}.items())),
        "contradictions_live": both_live, "corrections": len(history.corrections),
        "facts_found": len(history.facts) - len(missed), "facts": len(history.facts), "facts_missed": missed,
        "expired_plans_shown": len(shown), "expired_plans": len(expired), "expired_plans_listed": shown, "plans_with_expiry": dated,
        "expired_plans_in_episodes": in_episodes,
        "reflection_calls_per_100": sum(n for p, n in calls.items() if "reflect" in p) * per_100,
        "salience_calls_per_100": sum(n for p, n in calls.items() if "salien" in p) * per_100,
        "salience_chat_calls_per_100": on_chat * per_100,
        "calls_per_100": {p: round(n * per_100, 1) for p, n in sorted(calls.items())},
        "session_errors": run.session_errors, "seconds": run.seconds,
        "session_status": {part: dict(counts) for part, counts in run.session_status.items()},
    }


async def simulate_and_score(history: History, home: Path, label: str,
                             steps: dict[str, SessionStep | None]) -> dict[str, Any]:
    """`simulate`, then `score`, in one event loop."""
    return await score(await simulate(history, home, label, steps), history)


# -- the report -------------------------------------------------------------------------------------------------


def availability(steps: dict[str, SessionStep | None], scores: dict[str, dict[str, Any]]) -> list[str]:
    """A line per part of issue 13: available or not, as this run could tell."""
    lines = [f"{part}: {'available' if step else 'not available'}"
             + (f" (`{step.__module__}.{step.__name__}`)" if step else "") for part, step in steps.items()]
    salience = any(s["salience_calls_per_100"] for s in scores.values())
    from pagemind.runtime.memory_config import MemoryConfig

    has_config = "salience" in MemoryConfig.model_fields
    lines.append("salience: " + (f"available (small model `{SALIENCE_MODEL}` asked when the rules are unsure)"
                                 if has_config else "not available")
                 + ("" if salience else " (no salience model call was made)"))
    dated = max((s["plans_with_expiry"] for s in scores.values()), default=0)
    lines.append("expiry: " + (f"{dated} plan memories got `expires_at`" if dated else "not available "
                               "(no plan memory got `expires_at`)"))
    return lines


def table(history: History, scores: dict[str, dict[str, Any]]) -> str:
    """The results as a Markdown table, one column per run."""
    labels = list(scores)
    rows: list[tuple[str, Callable[[dict[str, Any]], str]]] = []
    for day in sorted({d for s in scores.values() for d in s["tokens_by_day"]}):
        rows.append((f"prompt tokens per turn, day {day} (mean, steps summed)",
                     lambda s, d=day: f"{s['tokens_by_day'].get(d, float('nan')):.0f}"))
    rows += [
        ("prompt tokens per turn, largest day mean", lambda s: f"{s['tokens_max_day']:.0f}"),
        ("live archival memories (by kind)",
         lambda s: f"{s['live']} ({', '.join(f'{k} {n}' for k, n in s['live_by_kind'].items())})"),
        ("planted contradictions still both live (target 0 with reflection)",
         lambda s: f"{s['contradictions_live']} of {s['corrections']}"),
        ("planted facts, latest version in archival_search top 5 (target ≥ 95 %)",
         lambda s: f"{s['facts_found']} of {s['facts']} ({s['facts_found'] / max(1, s['facts']):.0%})"),
        ("expired plans still in default results (target 0)",
         lambda s: f"{s['expired_plans_shown']} of {s['expired_plans']}"
                   + (f" (+{n} found only in an episode)" if (n := s["expired_plans_in_episodes"]) else "")),
        ("model calls for reflection per 100 turns", lambda s: f"{s['reflection_calls_per_100']:.1f}"),
        ("model calls for salience per 100 turns (of which on chit-chat)",
         lambda s: f"{s['salience_calls_per_100']:.1f} ({s['salience_chat_calls_per_100']:.1f})"),
        ("all model calls per 100 turns, by purpose",
         lambda s: ", ".join(f"{p} {n}" for p, n in s["calls_per_100"].items())),
        ("session-end results (part: status × days)", lambda s: "; ".join(
            f"{part}: " + ", ".join(f"{k} {n}" for k, n in counts.items())
            for part, counts in s["session_status"].items()) or "none run"),
        ("wall time, s", lambda s: f"{s['seconds']:.0f}"),
    ]
    head = "| measure | " + " | ".join(labels) + " |\n| --- |" + " --- |" * len(labels)
    return head + "\n" + "\n".join(f"| {name} | " + " | ".join(cell(scores[x]) for x in labels) + " |"
                                   for name, cell in rows)


def report(history: History, scores: dict[str, dict[str, Any]], steps: dict[str, SessionStep | None],
           note: str) -> str:
    """The section written to bench/RESULTS.md."""
    errors = [f"{label}: {e}" for label, s in scores.items() for e in s["session_errors"][:3]]
    turns = [t.text for d in history.days for t in d.turns]
    chinese = sum(1 for t in turns if re.search(r"[\u4e00-\u9fff]", t)) / max(1, len(turns))
    missed = "; ".join(f"{label}: {', '.join(s['facts_missed']) or 'none'}" for label, s in scores.items())
    shown = "; ".join(f"{label}: {', '.join(s['expired_plans_listed']) or 'none'}" for label, s in scores.items())
    return f"""
{note}; load average {os.getloadavg()[0]:.2f} at the end (other helpers' work was running). Seed
{history.seed}, {len(history.days)} days × {history.turns_per_day} user turns ({history.turn_count} turns, {chinese:.0%} of
them in Chinese), {len(history.facts)} planted facts, {len(history.corrections)} corrections,
{len(history.plans)} time-bound plans. The shipped companion agent (16k window), SQLite and Qdrant Edge in a temp
folder, the shipped embedder, a ManualClock moved turn by turn.

**The models are scripts** (bench/lifecycle_models.py), reading only their requests: the companion files a
message that states a fact or plan with `archival_memory_insert` (third person; kind todo when it names a time)
and otherwise replies; the reflector merges near-duplicate texts and, for two memories on the same subject by a
keyword table, lets the newer win; it marks todos whose written date has passed done; it writes no insights and
no profile. "on" runs the session-end steps once per simulated day; "off" runs none.

Parts of issue 13 in this checkout: {"; ".join(availability(steps, scores))}.
{("Session-end errors: " + "; ".join(errors)) if errors else ""}

{table(history, scores)}

Planted facts whose latest version was not in the top 5 — {missed}. Expired plans still in default results —
{shown}.
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--days", type=int, default=90)
    parser.add_argument("--turns-per-day", type=int, default=12)
    parser.add_argument("--mode", choices=("both", "on", "off"), default="both")
    parser.add_argument("--quick", action="store_true", help="10 days; print only, leave RESULTS.md alone")
    args = parser.parse_args()
    days = 10 if args.quick else args.days
    from pagemind.runtime.logs import configure_logging

    configure_logging("ERROR")
    note = machine_note()
    history = generate(args.seed, days, args.turns_per_day)
    available = session_end_steps()
    modes = {"both": ("off", "on"), "on": ("on",), "off": ("off",)}[args.mode]
    if not any(available.values()) and "on" in modes:
        print("reflection on: skipped, no session-end part (episodes, profile, reflection) is available here")
        modes = tuple(m for m in modes if m != "on") or ("off",)
    scores = {}
    with tempfile.TemporaryDirectory() as tmp:
        for mode in modes:
            steps = available if mode == "on" else {}
            home = Path(tmp) / mode
            home.mkdir()
            scores[f"reflection {mode}"] = asyncio.run(simulate_and_score(history, home, mode, steps))
    text = report(history, scores, available, note)
    print(text)
    if not args.quick:
        write_section("Memory lifecycle (bench/lifecycle.py)", text)


if __name__ == "__main__":
    main()
