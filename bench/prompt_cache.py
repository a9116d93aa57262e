"""How much of each request a provider's prompt cache can serve: a long companion conversation (LoCoMo turns,
the shipped companion agent at its default window, a scripted model that edits core memory, files archival
memories and replies), and for every step's request the longest common prefix with the previous step's request,
in tokens, as providers render it (tool schemas first, then the messages in order), divided by the request's
prompt tokens: the cacheable share.

Providers (OpenAI, Anthropic, vLLM, llama.cpp) reuse only an exact prefix. Requests right after a flush (the
summary changes, the oldest messages leave) or a core-memory edit (the system message changes) cannot share much:
they are counted apart, as the cache-breaking requests per 100 turns (a request whose common prefix with the
previous one ends inside the tool schemas or the system message).

    python -m bench.prompt_cache [--turns 600]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import zlib
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.common import LOCOMO, ROOT, machine_note, median, percentile, table_row, write_section
from bench.long_conversation import extractive_summary, turns_of
from pagemind.runtime.agent import Agent
from pagemind.runtime.model.client import ModelRequest
from pagemind.runtime.process.logs import configure_logging
from pagemind.runtime.spec.loading import load_spec
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.clock import ManualClock
from pagemind.runtime.testing.models import FunctionModel, by_purpose
from pagemind.runtime.testing.prompt_cache import common_prefix, rendered_prompt
from pagemind.runtime.testing.responses import Body, tool_call_body

EDIT_EVERY = 9  # a core-memory edit every ninth turn: what a companion does when it learns something lasting
FILE_EVERY = 4  # an archival insert every fourth turn
FACTS = json.dumps({"facts": [{"text": "The user keeps a journal.", "importance": 0.5}], "preferences": []})


def lines(turns: int) -> list[str]:
    """`turns` user messages: LoCoMo's conversations, one after another."""
    data = json.loads(Path(LOCOMO).read_text())
    found: list[str] = []
    for item in data:
        found += turns_of(item["conversation"])
        if len(found) >= turns:
            break
    return found[:turns]


def step(request: ModelRequest) -> Body:
    """The companion's scripted behaviour: to a user's message, sometimes a core-memory edit or an archival
    insert first; to a tool's result, the reply."""
    chat = [m for m in request.messages if m["role"] != "system"]
    last = chat[-1]
    if last["role"] == "tool":
        return tool_call_body("send_message", {"message": "I hear you. Tell me more?"})
    turn = sum(1 for m in chat if m["role"] == "user")
    text = str(last.get("content") or "")[:120]
    mark = zlib.crc32(text.encode())  # the same choice for the same message in every run
    if mark % EDIT_EVERY == 0:
        return tool_call_body("core_memory_append", {"label": "human", "content": text[:60]})
    if mark % FILE_EVERY == 0:
        return tool_call_body("archival_memory_insert", {"content": text})
    return tool_call_body("send_message", {"message": f"I hear you ({turn}). Tell me more?"})


def rendered(request: ModelRequest) -> list[int]:
    """The request's prompt as a provider renders it for its cache (`runtime.testing.prompt_cache`)."""
    return rendered_prompt(request.tools, request.messages)


@dataclass
class Shares:
    """Per step request: its cacheable share, and whether its prefix broke inside the pinned part."""

    shares: list[float]
    broken: list[bool]
    turns: int
    prompt_tokens: list[int]
    pinned: int  # the system message and the tool schemas of the first request, in tokens


async def run(turns: int, home: Path) -> Shares:
    """The conversation through the real runtime, and each step request's share."""
    spec = load_spec(ROOT / "runtime" / "data" / "agents" / "companion.yaml")
    model = FunctionModel(by_purpose(step, summarize=extractive_summary, extract=FACTS))
    start = datetime(2026, 1, 1, tzinfo=UTC)
    clock = ManualClock(start)
    store = StateStore(make_engine(f"sqlite:///{home / 'cache.db'}"))
    agent = await Agent.load(spec, model=model, store=store, clock=clock)
    sections = agent.compile().sections
    pinned = sum(n for name, n in sections.items() if name in ("system", "tools") or name.startswith("block:"))
    for i, line in enumerate(lines(turns)):
        clock.now = start + timedelta(minutes=3 * i)
        await agent.send(line)
    agent.monitor.cancel()
    requests = [r for r in model.requests if r.purpose == "step"]
    shares, broken, sizes = [], [], []
    previous: list[int] | None = None
    head = 0
    for request in requests:
        tokens = rendered(request)
        if previous is not None:
            shared = common_prefix(previous, tokens)
            shares.append(shared / len(tokens))
            broken.append(shared < head)
        previous = tokens
        head = len(rendered(_pinned_only(request)))
        sizes.append(len(tokens))
    return Shares(shares, broken, turns, sizes, pinned)


def _pinned_only(request: ModelRequest) -> ModelRequest:
    """The request cut to its tools and system message: where a common prefix must reach to reuse any message."""
    return ModelRequest(request.model, request.messages[:1], request.tools, request.temperature, request.max_tokens)


def report(result: Shares) -> str:
    """The block for bench/RESULTS.md."""
    kept = [s for s, b in zip(result.shares, result.broken, strict=True) if not b]
    breaking = sum(result.broken)
    head = table_row("requests", "median share", "p10 share", "median share, all", "breaking / 100 turns")
    row = table_row(
        len(result.shares),
        f"{median(kept):.3f}" if kept else "none kept",
        f"{percentile(kept, 10):.3f}" if kept else "-",
        f"{median(result.shares):.3f}",
        f"{100 * breaking / result.turns:.1f}",
    )
    return f"""
{machine_note()}; {result.turns} turns of LoCoMo conversations through the shipped companion (default window,
o200k_base tokens), a scripted model that edits core memory every ~{EDIT_EVERY}th
turn and files an archival memory every ~{FILE_EVERY}th; prompt tokens per step request: median
{median([float(t) for t in result.prompt_tokens]):.0f}. Share = tokens of the longest common prefix with the previous
step request ÷ the request's tokens (tool schemas first, then the messages). "Median share" leaves out the
cache-breaking requests (a flush or a core-memory edit changed the system message, so the common prefix ends
inside it). Target: median ≥ 0.95 on non-flush requests.

The pinned part (system message with its core blocks, and the tool schemas, as the compiler counts them) of the
new companion: {result.pinned} tokens (target ≤ 1,600 with all its tools).

{head}
| --- | --- | --- | --- | --- |
{row}
"""


def main() -> None:
    """Run the conversation and write the table."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--turns", type=int, default=600)
    args = parser.parse_args()
    configure_logging("WARNING")
    with tempfile.TemporaryDirectory() as tmp:
        result = asyncio.run(run(args.turns, Path(tmp)))
    body = report(result)
    print(body)
    write_section("prompt_cache", "Prompt cache: the cacheable share of each request", body)


if __name__ == "__main__":
    main()
