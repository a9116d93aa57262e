"""The memory lifecycle over a synthetic 90-day companion history (issue 13), with reflection on and off.

A seeded history (bench.lifecycle_data: daily chit-chat in English and Chinese, planted facts, later
corrections of some, time-bound plans) is fed turn by turn to the shipped companion agent (SQLite and Qdrant Edge
in a temp folder, the shipped embedder) under a ManualClock, with scripted models (bench.lifecycle_models): a
companion that files what a message states and a reflector that applies simple rules; neither reads the ground
truth. "On" runs the session-end steps once a simulated day (episodes' `end_session`, the profile's
`clear_ephemeral`, then `reflect`), each only where its part exists; "off" runs none. Salience and expiry live
in the runtime and act in both runs when they exist.

Reported (bench.lifecycle_report), into bench/RESULTS.md: prompt tokens per turn on days 1, 30 and 90; live
archival memories; planted contradictions still both live (target 0 with reflection on); planted facts whose
latest version `archival_search` finds in the top 5 (target ≥ 95 %); expired plans still in default results
(target 0); model calls for reflection and salience per 100 turns; wall time.

    python -m bench.lifecycle [--seed 7] [--days 90] [--turns-per-day 12] [--mode both|on|off]
    python -m bench.lifecycle --quick        # 10 days, results printed, RESULTS.md left alone
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import inspect
import json
import pkgutil
import re
import tempfile
import time
from collections import Counter
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from bench.common import ROOT, machine_note, write_section
from bench.lifecycle_data import History, generate
from bench.lifecycle_models import SALIENCE_MODEL, calls_by_purpose, respond
from bench.lifecycle_report import report
from bench.long_conversation import request_size
from pagemind.runtime.agent import Agent
from pagemind.runtime.memory.vectors.records import MemoryRecord
from pagemind.runtime.model.client import ModelRequest
from pagemind.runtime.process.settings import Settings
from pagemind.runtime.spec.agent import AgentSpec
from pagemind.runtime.spec.loading import load_spec
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.clock import ManualClock
from pagemind.runtime.testing.models import FunctionModel

REPORT_DAYS = (1, 30, 90)
# "On Monday she said she lived in Osaka" stays true: an episode is neither a stale fact nor a live plan, nor
# the memory that states a fact.
RECORDS_OF_THE_PAST = ("episode",)
SessionStep = Callable[[Agent], Awaitable[Any]]

# -- the other parts of issue 13, found through their contracts -------------------------------------------------

# part: (public function, modules to try first, words a module name must contain to be searched)
PARTS: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    "episodes": (
        "end_session",
        ("pagemind.runtime.episodes", "pagemind.runtime.memory.episodes"),
        ("episode", "session", "fading"),
    ),
    "profile": (
        "clear_ephemeral",
        ("pagemind.runtime.ephemeral", "pagemind.runtime.profile"),
        ("ephemeral", "profile", "session"),
    ),
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
        result = result if isinstance(result, dict) else {}
        if "error" in result:  # a part that reports its failure instead of raising
            run.session_errors.append(f"{part}: {str(result['error'])[:120]}")
        counts[str(result.get("status", "error" if "error" in result else "ok"))] += 1


async def simulate(history: History, home: Path, label: str, steps: dict[str, SessionStep | None]) -> Run:
    """Feed every day's turns to a fresh companion agent under `home`; the session-end `steps` after each day."""
    started = time.perf_counter()
    settings = Settings(home=home, database_url=f"sqlite:///{home / 'pagemind.db'}")
    clock = ManualClock(history.days[0].turns[0].at)
    model = FunctionModel(respond)
    agent = await Agent.load(
        bench_spec(), model=model, settings=settings, store=StateStore.open(settings.database_url), clock=clock
    )
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


def contradictions_live(live: list[MemoryRecord], history: History) -> int:
    """Corrections whose old and new values are both stated by live memories (episodes aside)."""
    statements = [r for r in live if r.kind not in RECORDS_OF_THE_PAST]
    both = 0
    for c in history.corrections:
        values = [v for _, v in history.facts[c.slot].values]
        states = {asserted(r.text, values) for r in statements}
        both += c.old in states and c.new in states
    return both


async def fact_lookups(archival: Any, history: History) -> tuple[list[str], int]:
    """`archival_search` for each planted fact's question, top 5, episodes aside: the facts whose latest value no
    hit names, and the corrected facts where a hit stating an older value ranks above the first naming the latest."""
    missed, stale_first = [], 0
    for fact in history.facts.values():
        hits = [
            h
            for h in await archival.search(fact.question, top_k=5, count_hits=False)
            if h.kind not in RECORDS_OF_THE_PAST
        ]
        values = [v for _, v in fact.values]
        states = [asserted(h.text, values) for h in hits]
        if not any(mentions(h.text, fact.latest) for h in hits):
            missed.append(f"{fact.slot} ({fact.latest})")
        first_stale = next((i for i, v in enumerate(states) if v is not None and v != fact.latest), None)
        first_latest = next((i for i, h in enumerate(hits) if mentions(h.text, fact.latest)), len(hits))
        stale_first += first_stale is not None and first_stale < first_latest
    return missed, stale_first


async def expired_plans(archival: Any, history: History, now: datetime) -> dict[str, Any]:
    """Plans past their end: how many, which still come up in the top 5 for their lookup, how many come up only
    through an episode that mentions them, and how many plan memories got an expiry at all."""
    expired = [p for p in history.plans if p.ends < now.date()]
    shown, in_episodes = [], 0
    for plan in expired:
        hits = await archival.search(plan.query, top_k=5, count_hits=False)
        naming = [h for h in hits if mentions(h.text, plan.marker)]
        if any(h.kind not in RECORDS_OF_THE_PAST for h in naming):
            shown.append(f"“{plan.text}” (day {plan.day})")
        in_episodes += bool(naming) and all(h.kind in RECORDS_OF_THE_PAST for h in naming)
    dated = sum(
        1
        for p in history.plans
        for r in archival.list(include_superseded=True)
        if r.kind not in RECORDS_OF_THE_PAST and mentions(r.text, p.marker) and r.expires_at is not None
    )
    return {
        "expired_plans": len(expired),
        "expired_plans_shown": len(shown),
        "expired_plans_listed": shown,
        "expired_plans_in_episodes": in_episodes,
        "plans_with_expiry": dated,
    }


def model_calls(run: Run, history: History) -> dict[str, Any]:
    """Model calls per 100 turns: reflection's, salience's (and those on chit-chat turns), all by purpose."""
    calls = calls_by_purpose(run.model.requests)
    chat = {t.text for d in history.days for t in d.turns if t.kind == "chat"}
    on_chat = sum(1 for r in run.model.requests if "salien" in r.purpose and turn_text(r) in chat)
    per_100 = 100 / max(1, run.turns)
    return {
        "reflection_calls_per_100": sum(n for p, n in calls.items() if "reflect" in p) * per_100,
        "salience_calls_per_100": sum(n for p, n in calls.items() if "salien" in p) * per_100,
        "salience_chat_calls_per_100": on_chat * per_100,
        "calls_per_100": {p: round(n * per_100, 1) for p, n in sorted(calls.items())},
    }


async def score(run: Run, history: History) -> dict[str, Any]:
    """Every reported measure of one run, computed at the end of its last day."""
    archival, now = run.agent.archival, run.agent.now()
    live = live_records(run, now)
    missed, stale_first = await fact_lookups(archival, history)
    means = {day: sum(v) / len(v) for day, v in run.tokens_by_day.items()}
    kinds = Counter(r.kind for r in live)
    return {
        "turns": run.turns,
        "tokens_by_day": {d: means[d] for d in (*REPORT_DAYS, len(history.days)) if d in means},
        "tokens_max_day": max(means.values()),
        "live": len(live),
        "live_by_kind": dict(sorted(kinds.items())),
        "contradictions_live": contradictions_live(live, history),
        "corrections": len(history.corrections),
        "facts_found": len(history.facts) - len(missed),
        "facts": len(history.facts),
        "facts_missed": missed,
        "stale_first": stale_first,
        "corrected_facts": sum(1 for t in history.facts.values() if len(t.values) > 1),
        **await expired_plans(archival, history, now),
        **model_calls(run, history),
        "session_errors": run.session_errors,
        "seconds": run.seconds,
        "session_status": {part: dict(counts) for part, counts in run.session_status.items()},
    }


async def simulate_and_score(
    history: History, home: Path, label: str, steps: dict[str, SessionStep | None]
) -> dict[str, Any]:
    """`simulate`, then `score`, in one event loop."""
    return await score(await simulate(history, home, label, steps), history)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--days", type=int, default=90)
    parser.add_argument("--turns-per-day", type=int, default=12)
    parser.add_argument("--mode", choices=("both", "on", "off"), default="both")
    parser.add_argument("--quick", action="store_true", help="10 days; print only, leave RESULTS.md alone")
    args = parser.parse_args()
    days = 10 if args.quick else args.days
    from pagemind.runtime.process.logs import configure_logging

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
        write_section("lifecycle", "Memory lifecycle", text)


if __name__ == "__main__":
    main()
