"""The process the flush crash suite kills (tests/crash/test_flush_crash.py): an agent with a small window and archival
memory (embedded Qdrant, fake embedder) runs keyed turns until its first flushes, then exits.

    python tests/support/flush_crash_child.py DATABASE HOME COUNT

Turn i sends "Day i: …" with the idempotency key "k-i"; the extractor proposes one fact per day it sees in the
evicted messages ("Lin's note for day i"). `PAGEMIND_KILL_AT` (runtime.process.crashpoints, read at import) makes it kill
itself at a named point. The test process restarts the same agent with `load` below.
"""

from __future__ import annotations

import asyncio
import json
import re
import sys
from pathlib import Path

from pagemind.runtime.agent import Agent
from pagemind.runtime.memory.archival.memory import ArchivalService
from pagemind.runtime.memory.vectors.edge import EdgeBackend
from pagemind.runtime.model.client import ModelRequest
from pagemind.runtime.spec.agent import AgentSpec
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.clock import ManualClock
from pagemind.runtime.testing.embedder import FakeEmbedder
from pagemind.runtime.testing.models import FunctionModel, by_purpose
from pagemind.runtime.testing.responses import reply_body, tool_call_body
from pagemind.runtime.testing.specs import spec_data

SPEC = AgentSpec.model_validate(
    {
        **spec_data("flusher", model_name="m", context_window=4000, max_output_tokens=500),
        "tools": ["send_message", "archival_memory_insert"],
        "memory": {"prefetch_top_k": 0},
    }
)
FILLER = "in the garden I planted tomatoes, watered the beans and talked with the neighbours " * 3


def text(day: int) -> str:
    """The user message of turn `day`."""
    return f"Day {day}: {FILLER}"


def fact(day: int) -> str:
    """The memory the extractor proposes for a day it sees."""
    return f"Lin's note for day {day}"


def extract(request: ModelRequest) -> dict:
    """One fact per day in the transcript."""
    days = sorted({int(d) for d in re.findall(r"user: Day (\d+):", request.messages[1]["content"])})
    return reply_body(json.dumps({"facts": [{"text": fact(d), "importance": 0.5} for d in days]}))


def step(request: ModelRequest) -> dict:
    """Every turn is one step: a reply."""
    return tool_call_body("send_message", {"message": "Lovely."})


async def load(database: str, home: Path) -> Agent:
    """The agent over `database`, its archival memory in `home` (opening it reconciles what a kill left)."""
    store = StateStore(make_engine(database))
    model = FunctionModel(by_purpose(step, summarize="Lin gardens.", extract=extract))
    agent = await Agent.load(SPEC, model=model, store=store, clock=ManualClock())
    backend = EdgeBackend(home / "shard", FakeEmbedder.dim)
    agent.archival = ArchivalService(
        agent.record.id, engine=store.engine, open_backend=lambda: backend, embedder=FakeEmbedder(), clock=agent.clock
    )
    return agent


async def main() -> int:
    """Run the turns (see the module docstring)."""
    database, home, count = sys.argv[1], Path(sys.argv[2]), int(sys.argv[3])
    agent = await load(database, home)
    for day in range(count):
        await agent.send(text(day), idempotency_key=f"k-{day}")
        print(f"ack {day}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
