"""Prompt tokens per request as a conversation grows, beside sending the whole conversation and beside the
published figures of mem0, Memori and Zep (issue 37, item 4).

A long companion conversation (LoCoMo turns, the shipped companion at its default window, the scripted model of
`bench.prompt_cache`). At the chosen turns it reports the first step request of that turn: its prompt tokens as
a provider renders them (tool schemas, then the messages), and the compiler's split of them: the pinned part
(tool schemas, system prompt, core blocks), the memory pagemind adds (summary, retrieved memories, the closing
message), and the conversation window. "Full context" is what an app without memory sends at that turn: the
system prompt and every user and assistant message so far.

    python -m bench.tokens_per_turn [--turns 10 100 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.common import ROOT, machine_note, table_row, write_section
from bench.long_conversation import extractive_summary
from bench.prompt_cache import FACTS, lines, step
from pagemind.runtime.agent import Agent
from pagemind.runtime.messages import Message
from pagemind.runtime.process.logs import configure_logging
from pagemind.runtime.spec.loading import load_spec
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.clock import ManualClock
from pagemind.runtime.testing.models import FunctionModel, by_purpose
from pagemind.runtime.testing.prompt_cache import rendered_prompt
from pagemind.runtime.tokens import count_tokens

PINNED = ("system", "tools")
MEMORY = ("summary", "retrieved", "memory_stats", "closing")

@dataclass(frozen=True)
class TurnTokens:
    """One measured turn: the request's tokens, its parts as the compiler counts them, and the full context."""

    turn: int
    prompt: int
    pinned: int
    memory: int
    window: int
    full_context: int


async def run(turns: list[int], home: Path) -> list[TurnTokens]:
    """The conversation through the real runtime, measured at each of `turns`."""
    spec = load_spec(ROOT / "runtime" / "data" / "agents" / "companion.yaml")
    model = FunctionModel(by_purpose(step, summarize=extractive_summary, extract=FACTS))
    start = datetime(2026, 1, 1, tzinfo=UTC)
    clock = ManualClock(start)
    agent = await Agent.load(
        spec, model=model, store=StateStore(make_engine(f"sqlite:///{home / 'turns.db'}")), clock=clock
    )
    found: list[TurnTokens] = []
    for i, line in enumerate(lines(max(turns)), start=1):
        clock.now = start + timedelta(minutes=3 * (i - 1))
        before = len(model.requests)
        await agent.send(line)
        if i in turns:
            first = next(r for r in model.requests[before:] if r.purpose == "step")
            found.append(measured(agent, i, rendered_prompt(first.tools, first.messages), spec.system))
    agent.monitor.cancel()
    return found


def measured(agent: Agent, turn: int, prompt: list[int], system: str) -> TurnTokens:
    """The turn's figures (the split is of the context as compiled after the turn, the nearest to its request)."""
    sections = agent.compile().sections
    pinned = sum(n for name, n in sections.items() if name in PINNED or name.startswith("block:"))
    memory = sum(n for name, n in sections.items() if name in MEMORY)
    conversation = [said(m) for m in agent.store.all_messages(agent.record.id) if m.role in ("user", "assistant")]
    full = count_tokens(system) + sum(count_tokens(text) for text in conversation)
    return TurnTokens(turn, len(prompt), pinned, memory, sections.get("messages", 0), full)


def said(message: Message) -> str:
    """What a message said to the other side: its text, or for the agent the text of its `send_message` calls."""
    replies = [json.loads(c.arguments).get("message", "") for c in message.tool_calls if c.name == "send_message"]
    return "\n".join([message.content or "", *replies]).strip()


def report(rows: list[TurnTokens]) -> str:
    """The block for bench/RESULTS.md."""
    head = table_row("turn", "prompt tokens", "pinned", "memory added", "window", "full context", "prompt ÷ full")
    body = "\n".join(
        table_row(
            r.turn,
            f"{r.prompt:,}",
            f"{r.pinned:,}",
            f"{r.memory:,}",
            f"{r.window:,}",
            f"{r.full_context:,}",
            f"{r.prompt / r.full_context:.2f}" if r.full_context else "-",
        )
        for r in rows
    )
    return f"""
{machine_note()}; LoCoMo through the shipped companion (window 16,000), `bench.prompt_cache`'s scripted
model. "Prompt tokens": the turn's first request as a provider renders it. "Pinned": tools, system prompt, core
blocks. "Memory added": summary, retrieved memories, closing message. "Window": the conversation in the prompt.
"Full context": the system prompt and every user and assistant message so far (an app without memory).

{head}
| --- | --- | --- | --- | --- | --- | --- |
{body}

Anchors (the memory a retrieval layer injects per query, not the whole request: compare "memory added"): mem0
≈1,800 tokens on LoCoMo vs ≈26,000 full context (Chhikara et al., 2025); Memori 721, 2.8 % of full context; Zep
median 5,760 (LongMemEval). pagemind also keeps the recent conversation in the window (MemGPT's design), most of
its prompt once the window fills, bounded by the window and the flush: the prompt stays flat as the full context grows.
"""


def main() -> None:
    """Run the conversation and write the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, nargs="+", default=[10, 100, 1000])
    args = parser.parse_args()
    configure_logging("WARNING")
    with tempfile.TemporaryDirectory() as tmp:
        rows = asyncio.run(run(sorted(args.turns), Path(tmp)))
    body = report(rows)
    print(body)
    write_section("tokens_per_turn", "Tokens per turn, against full context and the anchors", body)


if __name__ == "__main__":
    main()
