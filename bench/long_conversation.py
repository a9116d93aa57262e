"""A LoCoMo conversation fed turn by turn through an agent with an 8k window and a scripted model.

Reports tokens per request against the full-context size of the same history, compile time per step against
history length (it must stay flat), flushes and summary sizes, into bench/RESULTS.md.

`--latency` measures what a flush costs the user instead: every model call takes 300 ms, and the user-visible
time of each turn (p50, p95) is reported for turns with and without a flush, once with the flush's summary and
extraction done at the flush one after the other (main's way before issue 11, and a replay's) and once prepared
ahead in the background. Target: p95 of flush turns ≤ 1.2 × p95 of the other turns.

    python -m bench.long_conversation [--data PATH] [--conversation N]
    python -m bench.long_conversation --latency [--turns 500] [--model-ms 300]
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import re
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.common import LOCOMO, ROOT, machine_note, median, percentile, table_row, write_section
from pagemind.runtime.agent import Agent
from pagemind.runtime.compiler import message_tokens, wire_message_tokens
from pagemind.runtime.events import RuntimeEventBase
from pagemind.runtime.model.client import ModelRequest
from pagemind.runtime.observer import NullObserver
from pagemind.runtime.process.logs import configure_logging
from pagemind.runtime.spec.agent import AgentSpec
from pagemind.runtime.spec.loading import load_spec
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.clock import ManualClock
from pagemind.runtime.testing.models import FunctionModel, by_purpose
from pagemind.runtime.testing.responses import reply_body, tool_call_body
from pagemind.runtime.tokens import count_tokens

DEFAULT_DATA = LOCOMO


def turns_of(conversation: dict) -> list[str]:
    """Every turn as `[date] speaker: text`, in session order."""
    sessions = sorted(
        (int(m.group(1)), key)
        for key in conversation
        if (m := re.fullmatch(r"session_(\d+)", key)) and isinstance(conversation[key], list)
    )
    lines = []
    for _, key in sessions:
        date = conversation.get(f"{key}_date_time", "")
        lines += [f"[{date}] {t['speaker']}: {t['text']}" for t in conversation[key]]
    return lines


def extractive_summary(request: ModelRequest) -> dict:
    """A summary that keeps the first words of each evicted line, under the summary budget."""
    material = request.messages[1]["content"]
    lines = [line.split(": ", 2)[-1][:60] for line in material.splitlines() if line.startswith("[")]
    text = " / ".join(lines)
    while count_tokens(text) > request.max_tokens - 20:
        text = text[len(text) // 4 :]
    return reply_body(text or "nothing")


# Replies briefly, summarises extractively, extracts nothing.
BENCH_MODEL = by_purpose(
    lambda request: tool_call_body("send_message", {"message": "I hear you. Tell me more?"}),
    summarize=extractive_summary,
    extract='{"facts": [], "preferences": [], "progress": [], "todos": []}',
)


class MonitorEvents(NullObserver, list):
    """Keeps the pressure monitor's events as (kind, data) pairs."""

    def on_event(self, event) -> None:
        if isinstance(event, RuntimeEventBase):
            self.append((event.kind, dataclasses.asdict(event.data)))


def bench_spec() -> AgentSpec:
    """The companion agent with an 8k window."""
    base = load_spec(ROOT / "agents" / "companion.yaml")
    return AgentSpec.model_validate(
        {**base.model_dump(), "name": "longconv", "model": {**base.model.model_dump(), "context_window": 8192}}
    )


async def run(lines: list[str], home: Path) -> dict:
    spec = bench_spec()
    model = FunctionModel(BENCH_MODEL)
    clock_start = datetime(2026, 1, 1, tzinfo=UTC)
    clock = ManualClock(clock_start)
    agent = await Agent.load(
        spec, model=model, store=StateStore(make_engine(f"sqlite:///{home / 'l.db'}")), clock=clock
    )
    events = agent.observer = MonitorEvents()
    compile_ms: list[float] = []
    for i, line in enumerate(lines):
        clock.now = clock_start + timedelta(minutes=i)
        started = time.perf_counter()
        agent.compile()
        compile_ms.append((time.perf_counter() - started) * 1000)
        await agent.send(line)
    history = agent.store.all_messages(agent.record.id)
    full_context = (
        agent.compile().total_tokens
        - sum(message_tokens(m) for m in agent.window.messages)
        + sum(message_tokens(m) for m in history)
    )
    return {
        "model": model,
        "events": events,
        "compile_ms": compile_ms,
        "full_context": full_context,
        "summaries": agent.store.summaries(agent.record.id),
    }


def slow(seconds: float) -> FunctionModel:
    """The bench model, answering every call (steps, summaries, extractions) after `seconds`."""

    async def answer(request: ModelRequest) -> dict:
        await asyncio.sleep(seconds)
        return BENCH_MODEL(request)

    return FunctionModel(answer)


async def run_latency(lines: list[str], home: Path, ahead: bool, model_s: float) -> dict:
    """User-visible seconds per turn, split by whether the turn flushed."""
    clock_start = datetime(2026, 1, 1, tzinfo=UTC)
    clock = ManualClock(clock_start)
    store = StateStore(make_engine(f"sqlite:///{home / ('ahead' if ahead else 'in_order')}.db"))
    agent = await Agent.load(bench_spec(), model=slow(model_s), store=store, clock=clock)
    agent.monitor.concurrent = ahead
    events = agent.observer = MonitorEvents()
    flush_turns, other_turns, waited = [], [], []
    for i, line in enumerate(lines):
        clock.now = clock_start + timedelta(minutes=i)
        seen = len(events)
        started = time.perf_counter()
        await agent.send(line)
        took = time.perf_counter() - started
        flushes = [d for k, d in events[seen:] if k == "flush"]
        (flush_turns if flushes else other_turns).append(took)
        waited += [d["waited_ms"] for d in flushes]
    agent.monitor.cancel()
    return {
        "flush": flush_turns,
        "other": other_turns,
        "waited_ms": waited,
        "ahead": sum(1 for k, d in events if k == "flush" and d["ahead"]),
    }


def latency_main(lines: list[str], name: str, model_ms: float) -> None:
    """Both ways in one run; writes its own block of bench/RESULTS.md."""
    note = machine_note()
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for ahead in (False, True):
            results[ahead] = asyncio.run(run_latency(lines, Path(tmp), ahead, model_ms / 1000))
    rows = []
    for ahead, label in ((False, "in order, at the flush (main before issue 11)"), (True, "prepared ahead (now)")):
        r = results[ahead]
        flush, other = [1000 * t for t in r["flush"]], [1000 * t for t in r["other"]]
        ratio = percentile(flush, 95) / percentile(other, 95)
        used = f" ({r['ahead']} with the work ready)" if ahead else ""
        rows.append(
            f"| {label} | {len(flush)}{used} | {percentile(flush, 50):.0f} | "
            f"{percentile(flush, 95):.0f} | {percentile(other, 50):.0f} | {percentile(other, 95):.0f} | "
            f"{ratio:.2f} | {median(r['waited_ms']) if r['waited_ms'] else 0:.0f} |"
        )
    before, after = (percentile(results[a]["flush"], 95) for a in (False, True))
    head = table_row(
        "flush's model work",
        "flush turns",
        "flush p50",
        "flush p95",
        "other p50",
        "other p95",
        "p95 flush / p95 other",
        "flush waited, median ms",
    )
    report = f"""
{note}, load average {os.getloadavg()[0]:.2f} at the end; conversation {name}:
the first {len(lines)} turns, the companion agent with an 8,192-token window; every model call (steps, summaries,
extractions) answers after {model_ms:.0f} ms (`asyncio.sleep` in a scripted model; empty extraction, so no archival
inserts). User-visible time of `agent.send`, ms, both ways in this one run.

{head}
| --- | --- | --- | --- | --- | --- | --- | --- |
{chr(10).join(rows)}

p95 of flush turns, ahead / in order: {after / before:.2f}. Target: p95 of flush turns ≤ 1.2 × p95 of the other turns.
"""
    print(report)
    write_section("long_conversation.latency", "Flush latency", report)


def request_size(request: ModelRequest) -> int:
    """Prompt tokens of a request as sent (messages + tool schemas + priming)."""
    tools = count_tokens(json.dumps(request.tools, sort_keys=True)) if request.tools else 0
    return sum(wire_message_tokens(m, "o200k_base") for m in request.messages) + tools + 3


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--conversation", type=int, default=None, help="index; default: the longest")
    parser.add_argument("--latency", action="store_true", help="user-visible turn latency with a slow model")
    parser.add_argument("--turns", type=int, default=500, help="turns fed in --latency mode")
    parser.add_argument("--model-ms", type=float, default=300.0, help="each model call's latency in --latency mode")
    args = parser.parse_args()
    configure_logging("ERROR")
    samples = json.loads(args.data.read_text())
    index = (
        args.conversation
        if args.conversation is not None
        else max(range(len(samples)), key=lambda i: len(turns_of(samples[i]["conversation"])))
    )
    sample = samples[index]
    lines = turns_of(sample["conversation"])
    if args.latency:
        latency_main(lines[: args.turns], str(sample.get("sample_id", index)), args.model_ms)
        return
    with tempfile.TemporaryDirectory() as tmp:
        result = asyncio.run(run(lines, Path(tmp)))
    sizes = [request_size(r) for r in result["model"].requests if r.purpose == "step"]
    last = sizes[-100:]
    flushes = [d for k, d in result["events"] if k == "flush"]
    warnings = sum(1 for k, _ in result["events"] if k == "pressure_warning")
    summary_tokens = [d["summary_tokens"] for d in flushes]
    early, late = median(result["compile_ms"][10:60]), median(result["compile_ms"][-50:])
    full = result["full_context"]
    summaries = f"{median(summary_tokens) if summary_tokens else 0:.0f} / {max(summary_tokens, default=0)}"
    report = f"""
{machine_note()}; conversation {sample.get("sample_id", index)} of `{args.data.name}`: {len(lines)} turns fed as user
messages to the companion agent with an 8,192-token window (output reserve 800); scripted model (instant replies,
an extractive summarizer bounded by the summary budget, empty extraction).

| measure | value |
| --- | --- |
| requests (agent steps) | {len(sizes)} |
| tokens per request: mean / max | {sum(sizes) / len(sizes):.0f} / {max(sizes)} |
| mean of the last 100 requests | {sum(last) / len(last):.0f} |
| full context of the same history at the end | {full} |
| mean request / full context | {sum(sizes) / len(sizes) / full:.1%} (last 100: {sum(last) / len(last) / full:.1%}) |
| flushes / warnings | {len(flushes)} / {warnings} |
| summary tokens after each flush: median / max | {summaries} |
| compile ms, median of turns 10–60 | {early:.3f} |
| compile ms, median of the last 50 turns | {late:.3f} |
| compile time late / early | {late / early:.2f} (flat within 20 % = 0.8–1.2) |

Targets: mean request ≤ 10 % of full context by the end; compile time flat within 20 % from turn 10 to the end.
"""
    print(report)
    write_section("long_conversation", "Long conversation", report)


if __name__ == "__main__":
    main()
