"""The full search at 10,000 items per agent: `archival_search` over 10k memories and `conversation_search` over
10k stored messages of one agent, query embedding included (the shipped model, one thread, through the production
`CachedEmbedder`), p50/p95. The quick mode of bench.archival_latency (`--search10k`); it runs in a few minutes.

- archival: 10k memories filled as bench.archival_latency fills them (cheap word-vector embedder), the index
  built, then `ArchivalService.search` as the tool runs it (hybrid, hit counts written) with new queries.
- recall: the LoCoMo dev turns (../shared/data) stored as messages of one agent, cycled (each cycle a year later)
  to 10k; their dense vectors, filled by the word-vector embedder under the shipped model's id, are read from the
  SQL embedding cache when the index is first caught up (untimed); then `RecallService.search` (hybrid, the time
  boost on as by default) with the LoCoMo questions (categories 1–4: a share of them name a time). Nothing is
  stored between searches: each still checks for new messages (the catch-up), which then finds none.

    python -m bench.archival_latency --search10k [--queries 200] [--profile recall.prof] [--no-write]
"""

from __future__ import annotations

import asyncio
import cProfile
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import median, percentile
from bench.retrieval_locomo import DEFAULT_DATA, load
from pagemind.runtime.memory.archival.memory import ArchivalService
from pagemind.runtime.memory.embedding.cache import CachedEmbedder
from pagemind.runtime.memory.embedding.embedders import normalise
from pagemind.runtime.memory.embedding.local_model import FastEmbedEmbedder
from pagemind.runtime.memory.recall.memory import RecallService
from pagemind.runtime.memory.vectors.edge import EdgeBackend
from pagemind.runtime.messages import Message
from pagemind.runtime.spec.agent import AgentSpec
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.clock import ManualClock

SIZE = 10_000


def _clocked() -> Any:
    from bench.archival_latency import Clocked

    return Clocked()


_WORD = re.compile(r"[a-z]+")


class _AsModel:
    """The word-vector stand-in under the shipped model's id, so what it fills is read back as the model's."""

    def __init__(self, words: Any, model_id: str):
        self.words, self.model_id, self.dim = words, model_id, words.vectors.shape[1]

    def embed(self, texts: list[str]) -> np.ndarray:
        known = self.words.index
        rows = [
            self.words.vectors[[known[w] for w in _WORD.findall(t.lower()) if w in known] or [0]].sum(axis=0)
            for t in texts
        ]
        return normalise(np.vstack(rows)) if rows else np.zeros((0, self.dim), dtype=np.float32)


def _stats(clock: Any) -> dict[str, float]:
    return {
        "p50": median(clock.wall),
        "p95": percentile(clock.wall, 95),
        "cpu_p50": median(clock.cpu),
        "cpu_p95": percentile(clock.cpu, 95),
        "n": len(clock.wall),
    }


async def recall_10k(
    home: Path, words: Any, model: FastEmbedEmbedder, queries: int, profile: Path | None = None
) -> dict[str, Any]:
    """conversation_search p50/p95 (ms, wall) over SIZE messages of one agent."""
    conversations = load(DEFAULT_DATA)
    store = StateStore(make_engine(f"sqlite:///{home / 'recall-10k.db'}"))
    record = store.ensure_agent(AgentSpec.model_validate({"name": "lin", "model": {"name": "none"}, "system": "bench"}))
    turns = [t for c in conversations for t in c.turns]
    messages, cycle = [], 0
    while len(messages) < SIZE:
        shift = timedelta(days=365 * cycle)
        for t in turns[: SIZE - len(messages)]:
            messages.append(
                Message(
                    "user" if len(messages) % 2 == 0 else "assistant",
                    f"{t.speaker}: {t.text}",
                    t.at + shift,
                    in_context=False,
                )
            )
        cycle += 1
    store.append_messages(record.id, messages)
    last = messages[-1].created_at
    fill = RecallService(
        record.id, engine=store.engine, embedder=CachedEmbedder(_AsModel(words, model.model_id), store.engine)
    )
    fill.catch_up(dense=True)  # the SQL embedding cache now holds every message's vectors
    clock = ManualClock(last + timedelta(days=1))
    embedder = CachedEmbedder(model, store.engine)
    service = RecallService(record.id, engine=store.engine, embedder=embedder, clock=clock)
    service.catch_up(dense=True)  # the first search of a process reads them (untimed: once per process)
    computed = embedder.computed
    questions = [q.text for c in conversations for q in c.questions if q.category in (1, 2, 3, 4)][:queries]
    clocked, hits = _clocked(), []
    profiler = cProfile.Profile() if profile else None
    for question in questions:
        if profiler:
            profiler.enable()
        with clocked:
            found = await service.search(question)
        if profiler:
            profiler.disable()
        hits.append([h.id for h in found])
    if profiler:
        profiler.dump_stats(str(profile))
    store.engine.dispose()
    return {
        "recall": _stats(clocked),
        "recall_ids": hits,
        "recall_model_calls": embedder.computed - computed,
        "time_questions": sum(1 for q in questions if re.search(r"\bwhen\b", q, re.I)),
    }


async def archival_10k(home: Path, words: Any, model: FastEmbedEmbedder, queries: int) -> dict[str, Any]:
    """archival_search p50/p95 (ms, wall) over SIZE memories of one agent, as the tool runs it."""
    from bench.archival_latency import DIM, T0, bulk_load

    backend = EdgeBackend(home / "shard-10k", DIM, auto_optimize=False)
    engine = make_engine(f"sqlite:///{home / 'archival-10k.db'}")
    service = ArchivalService(
        1, engine=engine, open_backend=lambda: backend, embedder=CachedEmbedder(model, engine), clock=ManualClock(T0)
    )
    bulk_load(service, words, SIZE, 1)
    backend.optimize()
    rng = np.random.default_rng(3)
    clocked = _clocked()
    for n in range(queries):
        text = f"{words.text(rng, 4)} q{n}"
        with clocked:
            await service.search(text)
    backend.close()
    engine.dispose()
    return {"archival": _stats(clocked)}


def run(home: Path, words: Any, model: FastEmbedEmbedder, queries: int, profile: Path | None) -> dict[str, Any]:
    """Both measurements, recall first (it needs no index build)."""
    row = asyncio.run(recall_10k(home, words, model, queries, profile))
    row.update(asyncio.run(archival_10k(home, words, model, queries)))
    return row


def section(note: str, row: dict[str, Any]) -> str:
    """The RESULTS.md section of a --search10k run."""

    def cells(name: str) -> str:
        r = row[name]
        return f"{r['p50']:.1f} / {r['p95']:.1f} | {r['cpu_p50']:.1f} / {r['cpu_p95']:.1f}"

    return f"""
{note}. Target (issue 14): p50 ≤ 15 ms. `archival_search`: {SIZE:,} memories of one agent in an embedded Qdrant Edge
shard (indexed), searched as the tool runs it (hybrid, hit counts written), {row["archival"]["n"]} new queries.
`conversation_search`: the LoCoMo dev turns stored as {SIZE:,} messages of one agent, searched hybrid with the time
boost on (the defaults) by {row["recall"]["n"]} LoCoMo questions ({row["time_questions"]} of them ask "when"); its
index caught up once before (a process's first search reads every vector from the SQL cache). Every search embeds
its query with the shipped model. ms wall p50 / p95, and CPU ms of the process p50 / p95 (time spent waiting for a
core another process holds does not count: on this shared host the nearer figure for a quiet one).

| search | wall p50 / p95 | CPU p50 / p95 |
| --- | --- | --- |
| archival_search | {cells("archival")} |
| conversation_search | {cells("recall")} |
"""
