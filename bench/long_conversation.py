"""A LoCoMo conversation fed turn by turn through an agent with an 8k window and a scripted model.

Reports tokens per request against the full-context size of the same history, compile time per step against
history length (it must stay flat), flushes and summary sizes, into bench/RESULTS.md.

    python bench/long_conversation.py [--data PATH] [--conversation N]
"""

from __future__ import annotations

import argparse
import dataclasses
import asyncio
import json
import re
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import machine_note, median, write_section  # noqa: E402
from pagemind.runtime.agent import Agent  # noqa: E402
from pagemind.runtime.compiler import _message_tokens, message_tokens  # noqa: E402
from pagemind.runtime.events import RuntimeEventBase  # noqa: E402
from pagemind.runtime.logs import configure_logging  # noqa: E402
from pagemind.runtime.model_client import ModelRequest  # noqa: E402
from pagemind.runtime.observer import NullObserver  # noqa: E402
from pagemind.runtime.testing import FunctionModel, ManualClock, by_purpose, reply_body, tool_call_body  # noqa: E402
from pagemind.runtime.spec import AgentSpec, load_spec  # noqa: E402
from pagemind.runtime.state.store import StateStore  # noqa: E402
from pagemind.runtime.state.engine import make_engine  # noqa: E402
from pagemind.runtime.tokens import count_tokens  # noqa: E402

DEFAULT_DATA = Path(__file__).resolve().parent.parent.parent / "shared/data/locomo/locomo_dev.json"


def turns_of(conversation: dict) -> list[str]:
    """Every turn as `[date] speaker: text`, in session order."""
    sessions = sorted((int(m.group(1)), key) for key in conversation
                      if (m := re.fullmatch(r"session_(\d+)", key)) and isinstance(conversation[key], list))
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
        text = text[len(text) // 4:]
    return reply_body(text or "nothing")


# Replies briefly, summarises extractively, extracts nothing.
BENCH_MODEL = by_purpose(
    lambda request: tool_call_body("send_message", {"message": "I hear you. Tell me more?"}),
    summarize=extractive_summary, extract='{"facts": [], "preferences": [], "progress": [], "todos": []}',
)


class MonitorEvents(NullObserver, list):
    """Keeps the pressure monitor's events as (kind, data) pairs."""

    def on_event(self, event) -> None:  # noqa: ANN001
        if isinstance(event, RuntimeEventBase):
            self.append((event.kind, dataclasses.asdict(event.data)))


async def run(lines: list[str], home: Path) -> dict:
    base = load_spec(Path(__file__).resolve().parent.parent / "agents/companion.yaml")
    spec = AgentSpec.model_validate({**base.model_dump(), "name": "longconv",
                                     "model": {**base.model.model_dump(), "context_window": 8192}})
    model = FunctionModel(BENCH_MODEL)
    clock_start = datetime(2026, 1, 1, tzinfo=timezone.utc)
    clock = ManualClock(clock_start)
    agent = await Agent.load(spec, model=model, store=StateStore(make_engine(f"sqlite:///{home / 'l.db'}")), clock=clock)
    events = agent.observer = MonitorEvents()
    compile_ms: list[float] = []
    for i, line in enumerate(lines):
        clock.now = clock_start + timedelta(minutes=i)
        started = time.perf_counter()
        agent.compile()
        compile_ms.append((time.perf_counter() - started) * 1000)
        await agent.send(line)
    history = agent.store.all_messages(agent.record.id)
    full_context = agent.compile().total_tokens - sum(message_tokens(m) for m in agent.window.messages) \
        + sum(message_tokens(m) for m in history)
    return {"model": model, "events": events, "compile_ms": compile_ms, "full_context": full_context,
            "summaries": agent.store.summaries(agent.record.id)}


def request_size(request: ModelRequest) -> int:
    """Prompt tokens of a request as sent (messages + tool schemas + priming)."""
    tools = count_tokens(json.dumps(request.tools, sort_keys=True)) if request.tools else 0
    return sum(_message_tokens(m, "o200k_base") for m in request.messages) + tools + 3


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--conversation", type=int, default=None, help="index; default: the longest")
    args = parser.parse_args()
    configure_logging("ERROR")
    samples = json.loads(args.data.read_text())
    index = args.conversation if args.conversation is not None else max(
        range(len(samples)), key=lambda i: len(turns_of(samples[i]["conversation"])))
    sample = samples[index]
    lines = turns_of(sample["conversation"])
    with tempfile.TemporaryDirectory() as tmp:
        result = asyncio.run(run(lines, Path(tmp)))
    sizes = [request_size(r) for r in result["model"].requests if r.purpose == "step"]
    last = sizes[-100:]
    flushes = [d for k, d in result["events"] if k == "flush"]
    warnings = sum(1 for k, _ in result["events"] if k == "pressure_warning")
    summary_tokens = [d["summary_tokens"] for d in flushes]
    early, late = median(result["compile_ms"][10:60]), median(result["compile_ms"][-50:])
    full = result["full_context"]
    report = f"""
{machine_note()}; conversation {sample.get('sample_id', index)} of `{args.data.name}`: {len(lines)} turns fed as user
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
| summary tokens after each flush: median / max | {median(summary_tokens) if summary_tokens else 0:.0f} / {max(summary_tokens, default=0)} |
| compile ms, median of turns 10–60 | {early:.3f} |
| compile ms, median of the last 50 turns | {late:.3f} |
| compile time late / early | {late / early:.2f} (flat within 20 % = 0.8–1.2) |

Targets: mean request ≤ 10 % of full context by the end; compile time flat within 20 % from turn 10 to the end.
"""
    print(report)
    write_section("Long conversation (bench/long_conversation.py)", report)


if __name__ == "__main__":
    main()
