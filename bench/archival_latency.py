"""Archival memory latency on the embedded store (Qdrant Edge): insert throughput, search p50/p95 at 1k/10k/100k.

One agent's memories in one shard (plus the same number again for another agent, so the tenant filter works).
Vectors are pseudo-random unit vectors (384-d, from `FakeEmbedder`), not model output, so that 100k memories load
in seconds; the shipped model's own cost per query is measured separately and added in the text, not hidden in the
table.

    python bench/archival_latency.py [--sizes 1000,10000,100000] [--queries 200]
"""

from __future__ import annotations

import argparse
import asyncio
import random
import sys
import tempfile
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import machine_note, median, percentile, write_section  # noqa: E402
from pagemind.runtime.memory.archival import ArchivalService  # noqa: E402
from pagemind.runtime.memory.write_policy import keyword_document  # noqa: E402
from pagemind.runtime.memory.backend import AgentStore  # noqa: E402
from pagemind.runtime.memory.edge import EdgeBackend  # noqa: E402
from pagemind.runtime.memory.records import MemoryRecord, StoredPoint  # noqa: E402
from pagemind.runtime.memory.embeddings import FastEmbedEmbedder  # noqa: E402
from pagemind.runtime.logs import configure_logging  # noqa: E402
from pagemind.runtime.state.engine import make_engine  # noqa: E402
from pagemind.runtime.testing import FakeEmbedder, ManualClock  # noqa: E402

DIM = 384
WORDS = ("tea coffee sister brother cello piano garden dog cat job office lyon paris hiking swimming doctor allergy "
         "peanuts birthday wedding concert book movie recipe train flight budget rent yoga running painting").split()
T0 = datetime(2026, 11, 29, tzinfo=timezone.utc)


def sentence(rng: random.Random, n: int) -> str:
    """A synthetic memory text (numbered, eight words from a small vocabulary)."""
    return f"Memory {n}: " + " ".join(rng.choice(WORDS) for _ in range(8))


def bulk_load(store: AgentStore, embedder: FakeEmbedder, service: ArchivalService, count: int, seed: int) -> float:
    """Load `count` memories through the store in 256-point updates, each with its SQL row (search returns only
    memories SQL lists); returns points per second."""
    from pagemind.runtime.state.tables import archival_memories
    rng = random.Random(seed)
    started = time.perf_counter()
    for start in range(0, count, 256):
        texts = [sentence(rng, n) for n in range(start, min(count, start + 256))]
        vectors = embedder.embed(texts)
        points = []
        for n, (text, vector) in enumerate(zip(texts, vectors)):
            at = T0 - timedelta(minutes=start + n)
            record = MemoryRecord(agent_id=store.agent_id, text=text, kind="episode", created_at=at, updated_at=at)
            points.append(StoredPoint(record, vector, service._sparse(keyword_document(record))))
        store.upsert(points)
        with service.engine.begin() as conn:
            conn.execute(archival_memories.insert(), [p.record.model_dump() for p in points])
    return count / (time.perf_counter() - started)


async def measure(size: int, queries: int, home: Path) -> dict[str, float]:
    """Load `size` memories per agent (two agents), then time the write path, searches and dense queries."""
    backend = EdgeBackend(home / f"shard-{size}", DIM)
    embedder = FakeEmbedder(dim=DIM, model_id="random")
    engine = make_engine(f"sqlite:///{home / f'state-{size}.db'}")
    service = ArchivalService(1, engine=engine, open_backend=lambda: backend, embedder=embedder,
                              clock=ManualClock(T0))
    other = ArchivalService(2, engine=engine, open_backend=lambda: backend, embedder=embedder,
                            clock=ManualClock(T0))
    bulk = bulk_load(service.store, embedder, service, size, 1)
    bulk_load(other.store, embedder, other, size, 2)
    rng = random.Random(3)
    writes = []
    for n in range(100):  # the whole write path: date, embed, nearest same-kind lookup, upsert + flush, SQL
        started = time.perf_counter()
        await service.insert(f"New note {n}: " + " ".join(rng.choice(WORDS) for _ in range(8)), kind="episode")
        writes.append((time.perf_counter() - started) * 1000)
    searches, dense = [], []
    for n in range(queries):
        query = " ".join(rng.choice(WORDS) for _ in range(4))
        started = time.perf_counter()
        await service.search(query, top_k=5, count_hits=False)
        searches.append((time.perf_counter() - started) * 1000)
        vector = embedder.embed([query])[0]
        started = time.perf_counter()
        service.store.search_dense(vector, _live(), 5)
        dense.append((time.perf_counter() - started) * 1000)
    backend.close()
    return {"size": size, "bulk_pps": bulk, "write_p50": median(writes), "write_p95": percentile(writes, 95),
            "search_p50": median(searches), "search_p95": percentile(searches, 95),
            "dense_p50": median(dense), "dense_p95": percentile(dense, 95)}


def _live():
    from pagemind.runtime.memory.records import MemoryFilter

    return MemoryFilter(live_at=T0)


def model_cost() -> float:
    """Median ms to embed one short query with the shipped model (one thread)."""
    embedder = FastEmbedEmbedder()
    embedder.embed(["warm up"])
    costs = []
    for n in range(50):
        started = time.perf_counter()
        embedder.embed([f"what did Lin say about the concert number {n}?"])
        costs.append((time.perf_counter() - started) * 1000)
    return median(costs)


def main() -> None:
    """Command line entry point."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--queries", type=int, default=200)
    args = parser.parse_args()
    configure_logging("ERROR")
    note = machine_note()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in (int(s) for s in args.sizes.split(",")):
            row = asyncio.run(measure(size, args.queries, Path(tmp)))
            rows.append(row)
            print(f"{size:>7}: bulk {row['bulk_pps']:,.0f} points/s; write path p50 {row['write_p50']:.1f} ms; "
                  f"search p50 {row['search_p50']:.1f} ms p95 {row['search_p95']:.1f} ms; "
                  f"dense only p50 {row['dense_p50']:.2f} ms", flush=True)
    embed_ms = model_cost()
    table = "\n".join(
        f"| {r['size']:,} | {r['bulk_pps']:,.0f} | {r['write_p50']:.1f} / {r['write_p95']:.1f} | "
        f"{r['search_p50']:.1f} / {r['search_p95']:.1f} | {r['dense_p50']:.2f} / {r['dense_p95']:.2f} |" for r in rows)
    write_section("Archival latency (bench/archival_latency.py)", f"""
{note}. Qdrant Edge shard on local disk, WAL on, exact (no HNSW) search through the tenant index; each size =
that many memories for the searched agent plus as many for a second agent. Vectors are precomputed random
384-d unit vectors (not model output, to load 100k quickly); the shipped model adds ≈ {embed_ms:.1f} ms (median,
one thread) per text embedded, once per insert and once per search. Medians/p95 over 100 inserts and
{args.queries} searches; the machine is shared with other engineers' test runs, so quote the medians.

| memories per agent | bulk load, points/s (256 per update + flush) | write path ms p50 / p95 (dedupe lookup, upsert, flush, SQL) | archival_search ms p50 / p95 (dense + BM25 + ranking) | dense query alone ms p50 / p95 |
| --- | --- | --- | --- | --- |
{table}
""")


if __name__ == "__main__":
    main()
