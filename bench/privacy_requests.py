"""What forget and mute cost: an archival search with 0, 1 and 3 muted topics (the filter reads the topics, then
embeds the hits it checks, cached), and one forget by query over an agent with N memories and N messages.

    python -m bench.privacy_requests [--memories 200] [--searches 100]

In process, SQLite and the embedded vector store in a temporary folder, the shipped embedding model; no model calls.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from bench.common import machine_note, median, percentile, table_row, write_section
from pagemind.runtime.agent import Agent
from pagemind.runtime.forgetting.forget import forget_everywhere
from pagemind.runtime.messages import Message
from pagemind.runtime.process.logs import configure_logging
from pagemind.runtime.process.settings import Settings
from pagemind.runtime.testing.models import FunctionModel
from pagemind.runtime.testing.responses import reply_body
from pagemind.runtime.testing.specs import build_spec

TOPICS = ["my ex Mark", "the bank loan", "my sister's divorce"]
FACTS = [
    "Sam's ex Mark moved to Lisbon in {n}",
    "Sam drinks green tea number {n} in the morning",
    "Sam's sister Mei lives in Oslo, note {n}",
    "Sam runs 5 km on Tuesdays, week {n}",
]


async def _agent(folder: Path, memories: int) -> Agent:
    settings = Settings(home=folder, database_url=f"sqlite:///{folder / 'bench.db'}")
    spec = build_spec(tools=["send_message", "archival_memory_insert", "archival_search", "conversation_search"])
    agent = await Agent.load(spec, model=FunctionModel(lambda r: reply_body("ok")), settings=settings)
    assert agent.archival is not None
    for n in range(memories):
        await agent.archival.insert(FACTS[n % len(FACTS)].format(n=n))
        await agent.window.accept(Message("user", f"I told you: {FACTS[n % len(FACTS)].format(n=n)}", agent.now()))
    return agent


async def _searches(agent: Agent, count: int) -> list[float]:
    assert agent.archival is not None
    took = []
    for n in range(count):
        start = time.perf_counter()
        await agent.archival.search(["where does Mark live?", "what tea?", "Mei in Oslo", "running"][n % 4])
        took.append((time.perf_counter() - start) * 1000)
    return took


async def run(memories: int, searches: int) -> str:
    configure_logging("WARNING")
    rows = [table_row("muted topics", "search p50 ms", "search p95 ms")]
    with tempfile.TemporaryDirectory() as tmp:
        agent = await _agent(Path(tmp), memories)
        mutes = agent.forgetting.mutes
        assert mutes is not None
        await _searches(agent, 20)  # warm: the model, the store, the caches
        for muted in (0, 1, 3):
            for topic in TOPICS[:muted]:
                mutes.mute(topic)
            took = await _searches(agent, searches)
            rows.append(table_row(muted, f"{median(took):.1f}", f"{percentile(took, 95):.1f}"))
            for topic in TOPICS[:muted]:
                mutes.unmute(topic)
        start = time.perf_counter()
        report = await forget_everywhere(agent, "ex Mark", Path(tmp))
        forget_s = time.perf_counter() - start
        agent.store.engine.dispose()
    return (
        "\n".join(rows)
        + f"\n\nOne forget (`ex Mark`) over {memories} memories and {memories} messages: {forget_s:.2f} s "
        f"({report.archival} memories deleted, {report.messages} messages tombstoned, the shard rewritten, the WAL "
        f"truncated). {machine_note()}"
    )


def main() -> None:
    """Run and write the table into bench/RESULTS.md."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--memories", type=int, default=200)
    parser.add_argument("--searches", type=int, default=100)
    args = parser.parse_args()
    body = asyncio.run(run(args.memories, args.searches))
    print(body)
    write_section("privacy_requests", "Forget and mute: what they cost", body)


if __name__ == "__main__":
    main()
