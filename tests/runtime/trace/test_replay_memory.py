"""Replay holds however much external memory an agent has: a scripted 60-turn conversation with the shipped
companion (archival inserts and searches, conversation searches, prefetched memories, flushes that extract
memories, session ends with episodes and reflections between sessions), one trace per turn; every trace replays
identically in a scratch store that holds none of that memory, because the trace carries what each turn read.
A change to archival ranking makes the first trace it affects diverge, and only traces it affects."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from pagemind.runtime.agent import Agent
from pagemind.runtime.events import MemoryReadEvent, ToolResultEvent
from pagemind.runtime.memory.archival import search as archival_search
from pagemind.runtime.model.client import ModelRequest
from pagemind.runtime.observer import NullObserver
from pagemind.runtime.process.settings import Settings
from pagemind.runtime.session_end import close_session
from pagemind.runtime.spec.loading import load_spec
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.clock import ManualClock
from pagemind.runtime.testing.models import FunctionModel, is_pressure_alert
from pagemind.runtime.testing.responses import reply_body, tool_call_body
from pagemind.runtime.trace.reader import Trace, read_trace
from pagemind.runtime.trace.recorder import record
from pagemind.runtime.trace.replay import replay

ROOT = Path(__file__).parents[3]
START = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)

FACTS = [
    ("My sister Mei lives in Lyon and loves hiking.", ["family"]),
    ("I started a new job at the Oslo library in March.", ["work"]),
    ("I'm allergic to peanuts.", ["health"]),
    ("My brother Leo plays the cello in an orchestra.", ["family"]),
    ("I take the ferry to Hovedøya every Sunday.", ["routine"]),
    ("My cat is called Miso and she is twelve.", ["pets"]),
    ("I'm learning Japanese for a trip to Kyoto in October.", ["travel"]),
    ("My best friend Sara moved to Bergen last year.", ["friends"]),
]
QUESTIONS = ["where does Mei live", "what is my job", "what am I allergic to", "who plays the cello", "my cat"]
RECALLS = ["ferry", "Kyoto", "library"]
CHAT = (
    "Today I walked along the harbour, past the fortress and the opera house, and the light on the water was "
    "beautiful. I keep thinking about how the city changes with the seasons, and how quiet the mornings are. "
)


def script() -> list[str]:
    """Sixty user messages: facts to file, questions for archival and recall memory, and long chat that fills
    the window (flushes, extraction) — interleaved so that searches find what earlier turns stored."""
    messages: list[str] = []
    for n in range(60):
        match n % 5:
            case 0:
                text, _ = FACTS[(n // 5) % len(FACTS)]
                messages.append(f"REMEMBER {n}: {text}")
            case 1:
                messages.append(f"ASK {n}: {QUESTIONS[(n // 5) % len(QUESTIONS)]}?")
            case 2:
                messages.append(f"RECALL {n}: {RECALLS[(n // 5) % len(RECALLS)]}")
            case _:
                messages.append(f"Day note {n}: {CHAT * 2}")
    return messages


def _last_turn_message(request: ModelRequest) -> dict[str, Any]:
    return [m for m in request.messages if m["role"] != "system"][-1]


def _step(request: ModelRequest) -> dict[str, Any]:
    if is_pressure_alert(request):
        return tool_call_body("core_memory_append", {"label": "session", "content": "walks a lot"})
    last = _last_turn_message(request)
    if last["role"] == "tool":
        return tool_call_body("send_message", {"message": f"Thanks — noted ({len(request.messages)})."})
    text = str(last.get("content") or "")
    if "REMEMBER" in text:
        fact = text.split(": ", 1)[1]
        tags = next(t for f, t in FACTS if f in fact)
        return tool_call_body("archival_memory_insert", {"content": fact, "tags": tags})
    if "ASK" in text:
        return tool_call_body("archival_search", {"query": text.split(": ", 1)[1].rstrip("?")})
    if "RECALL" in text:
        return tool_call_body("conversation_search", {"query": text.split(": ", 1)[1]})
    return reply_body("That sounds like a lovely day.")


def respond(request: ModelRequest) -> dict[str, Any]:
    """The model: the agent's steps by the user's message; the runtime's own calls by purpose."""
    match request.purpose:
        case "summarize":
            return reply_body(f"Lin walked and talked about family and work ({len(request.messages)}).")
        case "extract":
            return reply_body(
                json.dumps({"facts": [{"text": "Lin walks along the harbour most days.", "importance": 0.6}]})
            )
        case "reflect":
            insight = {"text": "Lin's family is spread over Europe and matters to her.", "importance": 0.7}
            return reply_body(json.dumps({"insights": [insight]}))
        case _:
            return _step(request)


async def companion(home: Path, clock: ManualClock) -> Agent:
    spec = load_spec(ROOT / "agents" / "companion.yaml")
    spec.model = spec.model.model_copy(update={"context_window": 5000})  # flushes within sixty turns
    settings = Settings(home=home, database_url=f"sqlite:///{home / 'state.db'}")
    store = StateStore(make_engine(settings.database_url))
    return await Agent.load(spec, model=FunctionModel(respond), store=store, settings=settings, clock=clock)


async def end_session(agent: Agent) -> None:
    """The session ends between turns (episodes, the session block, a reflection): no part of any turn's trace,
    as under `pagemind run`, which closes the trace first."""
    watching, agent.observer = agent.observer, NullObserver()
    try:
        result = await close_session(agent)
    finally:
        agent.observer = watching
    assert "error" not in result, result


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> list[Path]:
    """The sixty turns, recorded one trace per turn (recorded once for the module: the real embedder is slow)."""
    import asyncio

    home = tmp_path_factory.mktemp("companion-home")
    traces = home / "traces"

    async def run() -> None:
        clock = ManualClock(START)
        agent = await companion(home, clock)
        record(agent, directory=traces)
        for n, message in enumerate(script()):
            clock.advance(minutes=9)
            if n and n % 20 == 0:
                await end_session(agent)
                clock.advance(days=2)
            await agent.run_turn(message)
        agent.store.engine.dispose()

    asyncio.run(run())
    return sorted(traces.glob("*.jsonl"))


def _reads(trace: Trace, read: str) -> list[MemoryReadEvent]:
    return [e for e in trace.events if isinstance(e, MemoryReadEvent) and e.read == read]


def test_the_conversation_exercises_every_kind_of_read(recorded):
    traces = [read_trace(p) for p in recorded]
    assert len(traces) == 60 and all(t.header.reads for t in traces)
    assert any(t.header.snapshot.archival_count for t in traces)  # memory the scratch store will not have
    candidates = [e for t in traces for e in _reads(t, "candidates")]
    assert any(e.result["dense"] for e in candidates)  # searches and prefetches found memories
    assert any(_reads(t, "neighbour") and _reads(t, "neighbour")[0].result for t in traces)  # a write met one
    assert any(e.source == "recall" for t in traces for e in t.events if isinstance(e, MemoryReadEvent))
    flushes = [e for t in traces for e in t.events if getattr(e, "kind", None) == "flush"]
    assert flushes and any(f.data.extracted for f in flushes)  # type: ignore[attr-defined]
    results = [e for t in traces for e in t.events if isinstance(e, ToolResultEvent) and e.name == "archival_search"]
    assert any("Lyon" in r.content for r in results)
    prompts = [json.dumps(e.body) for t in traces for e in t.events if getattr(e, "purpose", None) == "step"]
    assert any("<retrieved_memories>" in p for p in prompts)
    reflected = [
        t for t in traces if any("spread over Europe" in json.dumps(e.result) for e in _reads(t, "candidates"))
    ]
    assert reflected  # a reflection's insight, made between sessions, was read by a later turn


async def test_every_trace_replays_identically(recorded):
    outcomes = {p.name: await replay(read_trace(p)) for p in recorded}
    failed = {name: r.divergence for name, r in outcomes.items() if r.status != "identical"}
    assert not failed, failed


async def test_an_old_trace_without_reads_says_why_it_cannot_replay(recorded, tmp_path):
    # The same turn as an older pagemind wrote it (no memory_read lines, header without `reads`).
    source = next(
        p for p in recorded if read_trace(p).header.snapshot.archival_count and _reads(read_trace(p), "candidates")
    )
    lines = [json.loads(line) for line in source.read_text().splitlines()]
    lines[0].pop("reads")
    old = tmp_path / source.name
    old.write_text("".join(json.dumps(line) + "\n" for line in lines if line["type"] != "memory_read"))
    report = await replay(read_trace(old))
    if report.status == "diverged":
        assert (
            report.divergence is not None and "recorded before traces held what a turn read" in report.divergence.detail
        )
    else:
        assert report.status == "identical"


async def test_a_ranking_change_diverges_at_the_first_trace_it_affects(recorded, monkeypatch):
    # The fused relevance turned upside down: the least relevant candidate ranks first, so every search that
    # found two or more memories, or cut its candidates to a top k, shows others or in another order.
    fused = archival_search.fuse
    monkeypatch.setattr(archival_search, "fuse", lambda keyword, dense, weight: 1.001 - fused(keyword, dense, weight))
    first_with_memories = next(
        n for n, p in enumerate(recorded) if any(e.result["dense"] for e in _reads(read_trace(p), "candidates"))
    )
    outcomes = [await replay(read_trace(p)) for p in recorded]
    diverged = [n for n, r in enumerate(outcomes) if r.status == "diverged"]
    assert diverged, "a ranking change must show in the replay"
    assert diverged[0] >= first_with_memories  # traces that ranked nothing are not disturbed
    untouched = [n for n, p in enumerate(recorded) if not _reads(read_trace(p), "candidates")]
    assert untouched and not set(untouched) & set(diverged)
    divergence = outcomes[diverged[0]].divergence
    assert divergence is not None
    assert "archival_search" in divergence.what or "retrieved_memories" in divergence.detail
