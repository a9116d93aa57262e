"""The runtime's own cost per step (everything but the model, which answers instantly).

Agents with 10, 1,000 and 10,000 stored messages; only the recent window is in context, as in a long-lived
agent, so the compiler must not slow down with history. Writes p50/p95 into bench/RESULTS.md.

    python -m bench.step_overhead [--turns 200]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from datetime import timedelta
from pathlib import Path

from bench.common import machine_note, median, percentile, write_section
from pagemind.runtime.agent import Agent
from pagemind.runtime.messages import Message
from pagemind.runtime.process.logs import configure_logging
from pagemind.runtime.spec.loading import load_spec
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.records import utcnow
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.models import FunctionModel
from pagemind.runtime.testing.responses import tool_call_body

IN_CONTEXT = 20


def seed_history(store: StateStore, agent_id: int, count: int) -> None:
    """`count` stored messages; only the last IN_CONTEXT stay in the window."""
    start = utcnow() - timedelta(days=30)
    messages = [
        Message(
            "user" if i % 2 == 0 else "assistant",
            f"message {i}: the weather was fine and we talked about tea",
            start + timedelta(minutes=i),
            in_context=i >= count - IN_CONTEXT,
        )
        for i in range(count)
    ]
    for offset in range(0, count, 2000):
        store.append_messages(agent_id, messages[offset : offset + 2000])


async def measure(history: int, turns: int, home: Path) -> list[float]:
    store = StateStore(make_engine(f"sqlite:///{home / f'h{history}.db'}"))
    model = FunctionModel(lambda request: tool_call_body("send_message", {"message": "ok"}))
    agent = await Agent.load(load_spec("agents/companion.yaml"), model=model, store=store)
    seed_history(store, agent.record.id, history)
    agent = await Agent.load(agent.spec, model=model, store=store)
    costs = []
    for i in range(turns):
        started = time.perf_counter()
        await agent.send(f"turn {i}")
        costs.append((time.perf_counter() - started) * 1000)
        # Keep the window at a steady size, as the pressure monitor does, so only history length varies.
        agent.window.messages = agent.window.messages[-IN_CONTEXT:]
    return costs[5:]  # first turns warm caches


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=200)
    args = parser.parse_args()
    configure_logging("ERROR")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for history in (10, 1_000, 10_000):
            costs = asyncio.run(measure(history, args.turns, Path(tmp)))
            rows.append((history, median(costs), percentile(costs, 95)))
            print(f"history {history:>6}: p50 {rows[-1][1]:.2f} ms  p95 {rows[-1][2]:.2f} ms per step")
    table = "\n".join(f"| {h:,} | {p50:.2f} | {p95:.2f} |" for h, p50, p95 in rows)
    flat = rows[-1][1] / rows[0][1]
    write_section(
        "step_overhead",
        "Step overhead",
        f"""
{machine_note()}; {args.turns} one-step turns per size (first 5 dropped), model answers instantly, SQLite on local disk.
A step here = store the user message, compile the prompt, dispatch `send_message`, commit the step (one transaction).

| stored messages | p50 ms/step | p95 ms/step |
| --- | --- | --- |
{table}

Ratio p50 at 10,000 vs 10 messages: {flat:.2f} (flat = 1.0). Target: p50 ≤ 3 ms and flat.
""",
    )


if __name__ == "__main__":
    main()
