"""Archival latency on the embedded store (Qdrant Edge): search and insert p50/p95 at 1k/10k/100k memories per
agent (and as many for a second agent), recall@10 of the index against exact search, concurrent inserts.

Filling 100k memories per agent with the shipped model would take minutes per size, so the stored memories are
embedded by a cheap deterministic stand-in with the structure of real text embeddings: the model's own vectors
of 4,000 vocabulary words (embedded once per run), centred, summed over the words of the memory (Zipf-distributed
words, as in text), normalised. Its pairs have a mean cosine of ≈ 0.16 (the model's own sentences here: ≈ 0.12);
random vectors would be the hardest case for HNSW and unlike any text. What the timings include is the real thing:
every search embeds its query with the shipped model (all-MiniLM-L6-v2 int8, one thread) through the production
`CachedEmbedder`, and every timed insert embeds its text the same way (SQL embedding cache included). Recall@10 is
measured on the dense retriever (index vs `exact=True`, same filter) with queries made like the memories (in the
memories' distribution), and also with the model's query vectors.

    python -m bench.archival_latency [--sizes 1000,10000,100000] [--queries 200]
    python -m bench.archival_latency --search10k [--queries 200] [--no-write]   # the full searches at 10k (minutes)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np

from bench.common import machine_note, median, percentile, table_row, write_section
from pagemind.runtime.memory.archival.group_commit import group_commit
from pagemind.runtime.memory.archival.memory import ArchivalService
from pagemind.runtime.memory.archival.write_policy import keyword_document
from pagemind.runtime.memory.embedding.cache import CachedEmbedder
from pagemind.runtime.memory.embedding.embedders import normalise
from pagemind.runtime.memory.embedding.local_model import DEFAULT_MODEL_DIR, FastEmbedEmbedder
from pagemind.runtime.memory.retrieval.keywords import analysed
from pagemind.runtime.memory.vectors.backend import AgentStore
from pagemind.runtime.memory.vectors.edge import EdgeBackend
from pagemind.runtime.memory.vectors.index import PLAN
from pagemind.runtime.memory.vectors.records import MemoryFilter, MemoryRecord, StoredPoint
from pagemind.runtime.process.logs import configure_logging
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.tables.archival import archival_memories
from pagemind.runtime.testing.clock import ManualClock

DIM = 384
T0 = datetime(2026, 11, 29, tzinfo=UTC)
VOCABULARY = 4000
CONCURRENT = 8  # agents inserting at once in the group-commit run
PARTS = ("embed", "retrieve", "sql", "activity", "rank")  # a search's steps, timed one by one


class WordVectors:
    """The cheap stand-in embedder for filling (see the module docstring): deterministic, structured like text."""

    model_id, dim = "bench-word-vectors", DIM

    def __init__(self, model: FastEmbedEmbedder):
        words = [w.strip() for w in (DEFAULT_MODEL_DIR / "vocab.txt").read_text().splitlines()]
        self.words = [w for w in words if re.fullmatch(r"[a-z]{3,}", w)][:VOCABULARY]
        vectors = np.vstack([model.embed([w]) for w in self.words])
        self.vectors = vectors - vectors.mean(axis=0)
        self.index = {w: n for n, w in enumerate(self.words)}
        weights = 1 / np.arange(1, len(self.words) + 1) ** 0.8
        self.weights = weights / weights.sum()

    def text(self, rng: np.random.Generator, words: int) -> str:
        """Zipf-distributed words from the vocabulary."""
        return " ".join(self.words[i] for i in rng.choice(len(self.words), size=words, p=self.weights))

    def embed(self, texts: list[str]) -> np.ndarray:
        """The normalised sum of the texts' known words' vectors."""
        rows = [self.vectors[[self.index[w] for w in t.split() if w in self.index] or [0]].sum(axis=0) for t in texts]
        return normalise(np.vstack(rows))


def bulk_load(service: ArchivalService, words: WordVectors, count: int, seed: int) -> float:
    """Load `count` memories (point + settled SQL row each), 512 per write; returns points per second."""
    rng, store = np.random.default_rng(seed), service.store
    started = time.perf_counter()
    for start in range(0, count, 512):
        texts = [f"{words.text(rng, 8)} {n}" for n in range(start, min(count, start + 512))]
        points = []
        for n, (text, vector) in enumerate(zip(texts, words.embed(texts), strict=True)):
            at = T0 - timedelta(minutes=start + n)
            record = MemoryRecord(agent_id=store.agent_id, text=text, kind="episode", created_at=at, updated_at=at)
            points.append(StoredPoint(record, vector, service.keyword_vector(keyword_document(record))))
        store.upsert(points)
        with service.engine.begin() as conn:
            conn.execute(archival_memories.insert(), [p.record.model_dump() | {"state": "live"} for p in points])
    return count / (time.perf_counter() - started)


def recall(store: AgentStore, vectors: np.ndarray) -> float:
    """Mean recall@10 of the index's dense search against exact search, live memories only."""
    flt, found = MemoryFilter(live_at=T0), []
    for vector in vectors:
        exact = {h.record.id for h in store.search_dense(vector, flt, 10, exact=True)}
        approx = {h.record.id for h in store.search_dense(vector, flt, 10)}
        found.append(len(exact & approx) / max(1, len(exact)))
    return float(np.mean(found))


def timed(samples: list[float], started: float) -> None:
    samples.append((time.perf_counter() - started) * 1000)


class Clocked:
    """Wall and CPU ms of each operation timed with it (CPU: this process, every thread; waiting for a core that
    other processes hold does not count, so on a loaded host it is nearer a quiet host's wall time)."""

    def __init__(self) -> None:
        self.wall: list[float] = []
        self.cpu: list[float] = []

    def __enter__(self) -> Clocked:
        self._wall, self._cpu = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *_: object) -> None:
        self.wall.append((time.perf_counter() - self._wall) * 1000)
        self.cpu.append((time.process_time() - self._cpu) * 1000)


async def measure(
    size: int, queries: int, home: Path, words: WordVectors, model: FastEmbedEmbedder, sweep: bool = False
) -> dict:
    """Two agents of `size` memories each, indexed; then searches, inserts, recall and concurrent inserts."""
    backend = EdgeBackend(home / f"shard-{size}", DIM, auto_optimize=False)  # the bench optimizes when it says
    engine = make_engine(f"sqlite:///{home / f'state-{size}.db'}")

    def service(agent_id: int) -> ArchivalService:
        return ArchivalService(
            agent_id,
            engine=engine,
            open_backend=lambda: backend,
            embedder=CachedEmbedder(model, engine),
            clock=ManualClock(T0),
        )

    first, second = service(1), service(2)
    bulk = (bulk_load(first, words, size, 1) + bulk_load(second, words, size, 2)) / 2
    started = time.perf_counter()
    backend.optimize()
    build_s = time.perf_counter() - started
    info = backend.shard.info()
    rng = np.random.default_rng(3)
    texts = [words.text(rng, 4) for _ in range(queries)]
    row: dict = {"size": size, "bulk_pps": bulk, "build_s": build_s, "segments": info.segments_count}
    for name, svc in (("search", first), ("search2", second)):
        clock = Clocked()
        for n, text in enumerate(texts):
            with clock:
                await svc.search(f"{text} {name}{n}", top_k=5, count_hits=False)  # a new query: the model runs
        row[name], row[name + "_cpu"] = clock.wall, clock.cpu
    # where a search's time goes (the same steps as ArchivalSearch.ranked_page, timed one by one)
    parts = {name: Clocked() for name in PARTS}
    flt = MemoryFilter(live_at=T0)
    for n, text in enumerate(texts[:100]):
        with parts["embed"]:
            vector = first.embedder.embed_query(f"{text} parts{n}")
        with parts["retrieve"]:
            dense, keyword = first.store.search_hybrid(
                vector, first.keyword_vector(analysed(text), query=True), flt, 50
            )
        with parts["sql"]:
            first.ledger.live_ids([h.record.id for h in [*dense, *keyword]])
        with parts["activity"]:  # a read each time here: no user message today (in a turn, one a day)
            activity = first.activity.at(T0)
        with parts["rank"]:
            first.searcher.rank(vector, dense, keyword, T0, "hybrid", activity)
    row["parts"] = {k: (median(v.wall), median(v.cpu)) for k, v in parts.items()}
    clock = Clocked()
    for n, text in enumerate(texts[:50]):  # as the tool runs it: hit counts written
        with clock:
            await first.search(f"{text} hits{n}", top_k=5)
    row["search_hits"], row["search_hits_cpu"] = clock.wall, clock.cpu
    row["recall"] = recall(first.store, words.embed(texts[:100]))
    row["recall_model"] = recall(first.store, np.vstack([model.embed([t]) for t in texts[:50]]))
    if sweep:
        from bench.archival_ab import ef_sweep

        row["sweep"] = ef_sweep(backend, words.embed(texts[:100]), np.vstack([model.embed([t]) for t in texts[:50]]))
    clock = Clocked()
    irng = random.Random(4)
    for n in range(100):  # the whole write path: date, embed (model), nearest same-kind lookup, group commit
        with clock:
            await first.insert(
                f"New note {n}: " + " ".join(irng.choice(words.words[:500]) for _ in range(8)), kind="episode"
            )
    row["insert"], row["insert_cpu"] = clock.wall, clock.cpu
    row.update(await concurrent_inserts(service, words, backend))
    backend.close()
    engine.dispose()
    return row


async def concurrent_inserts(service, words: WordVectors, backend: EdgeBackend) -> dict:
    """CONCURRENT agents inserting at once, 25 memories each: latency per insert, inserts per group commit."""
    agents = [service(10 + n) for n in range(CONCURRENT)]
    commit = group_commit(backend)
    batches, inserts = commit.batches, commit.inserts
    samples: list[float] = []
    rng = random.Random(5)

    async def one(agent: ArchivalService, n: int) -> None:
        started = time.perf_counter()
        await agent.insert(f"Agent note {n}: " + " ".join(rng.choice(words.words[:500]) for _ in range(8)))
        timed(samples, started)

    started = time.perf_counter()
    for n in range(25):
        await asyncio.gather(*(one(agent, n) for agent in agents))
    wall = time.perf_counter() - started
    return {
        "concurrent": samples,
        "per_batch": (commit.inserts - inserts) / max(1, commit.batches - batches),
        "concurrent_rate": len(samples) / wall,
    }


def model_cost(model: FastEmbedEmbedder) -> float:
    """Median ms to embed one short query with the shipped model (one thread)."""
    costs: list[float] = []
    for n in range(50):
        started = time.perf_counter()
        model.embed([f"what did Lin say about the concert number {n}?"])
        timed(costs, started)
    return median(costs)


def p(values: list[float]) -> str:
    return f"{median(values):.1f} / {percentile(values, 95):.1f}"


def pc(row: dict, name: str) -> str:
    """wall p50 / p95, and CPU p50 (what a quiet host's wall time would be)."""
    return f"{p(row[name])} ({median(row[name + '_cpu']):.1f})"


def main() -> None:
    """Command line entry point."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--sizes", default="1000,10000,100000")
    parser.add_argument("--queries", type=int, default=200)
    parser.add_argument(
        "--search10k",
        action="store_true",
        help="only the full archival_search and "
        "conversation_search at 10k per agent (bench.search_latency; minutes), in a block of its own",
    )
    parser.add_argument("--profile", help="with --search10k: cProfile the recall searches into this file")
    parser.add_argument("--ids", help="with --search10k: write the recall results' ids (JSON) here, to compare runs")
    parser.add_argument("--no-write", action="store_true", help="with --search10k: print only, leave RESULTS.md")
    parser.add_argument("--json", help="write the rows here (JSON) instead of RESULTS.md (bench.archival_ab)")
    parser.add_argument("--sweep", action="store_true", help="also recall@10 and cost of the dense search per hnsw_ef")
    args = parser.parse_args()
    configure_logging("ERROR")
    note = machine_note()
    model = FastEmbedEmbedder()
    words = WordVectors(model)
    if args.search10k:
        from bench.search_latency import run

        with tempfile.TemporaryDirectory() as tmp:
            row = run(Path(tmp), words, model, args.queries, Path(args.profile) if args.profile else None)
        ids = row.pop("recall_ids")
        if args.ids:
            Path(args.ids).write_text(json.dumps(ids))
        load = open("/proc/loadavg").read().split()[0] if Path("/proc/loadavg").exists() else "?"
        note = f"{note}, {load} at the end; query embedding ≈ {model_cost(model):.1f} ms (the model alone, one thread)"
        print(f"{note}; {row}")
        if not args.no_write:
            from bench.search_latency import section

            write_section("archival_latency.search10k", "Full search at 10,000 per agent", section(note, row))
        return
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for size in (int(s) for s in args.sizes.split(",")):
            row = asyncio.run(measure(size, args.queries, Path(tmp), words, model, args.sweep))
            rows.append(row)
            print(
                f"{size:>7}: search {pc(row, 'search')} (2nd agent {pc(row, 'search2')}), "
                f"insert {pc(row, 'insert')}, "
                f"recall@10 {row['recall']:.3f} / {row['recall_model']:.3f}, parts {row['parts']}, "
                f"build {row['build_s']:.1f} s, {row['segments']} segments",
                flush=True,
            )
    embed_ms = model_cost(model)
    load = open("/proc/loadavg").read().split()[0] if Path("/proc/loadavg").exists() else "?"
    if args.json:
        Path(args.json).write_text(json.dumps({"note": note, "load_end": load, "embed_ms": embed_ms, "rows": rows}))
        return
    table = "\n".join(
        f"| {r['size']:,} | {pc(r, 'search')} | {pc(r, 'search2')} | {pc(r, 'search_hits')} | {pc(r, 'insert')} | "
        f"{r['recall']:.3f} / {r['recall_model']:.3f} | {p(r['concurrent'])} ({r['per_batch']:.1f} per commit, "
        f"{r['concurrent_rate']:.0f}/s) | {r['bulk_pps']:,.0f} / {r['build_s']:.0f} s, {r['segments']} segments |"
        for r in rows
    )
    parts = "\n".join(
        f"| {r['size']:,} | "
        + " | ".join(f"{r['parts'][k][0]:.2f} ({r['parts'][k][1]:.2f})" for k in PARTS if k in r["parts"])
        + " |"
        for r in rows
    )
    sweep = "".join(
        f"""
recall@10 of the dense index against exact search (queries like the memories / the model's query vectors) and the
median CPU ms of one such search (limit 10), per `hnsw_ef`, at {r["size"]:,} memories per agent (`--sweep`):

| hnsw_ef | """
        + " | ".join(str(e["ef"]) for e in r["sweep"])
        + " |\n| --- | "
        + " | ".join("---" for _ in r["sweep"])
        + " |\n| recall@10 | "
        + " | ".join(f"{e['recall']:.3f} / {e['recall_model']:.3f}" for e in r["sweep"])
        + " |\n| CPU ms | "
        + " | ".join(f"{e['cpu_ms']:.2f}" for e in r["sweep"])
        + " |\n"
        for r in rows
        if r.get("sweep")
    )
    head = table_row(
        "memories per agent",
        "archival_search",
        "second agent's search",
        "search counting hits",
        "insert (sequential)",
        "recall@10",
        f"{CONCURRENT} concurrent inserts (group commit)",
        "bulk load points/s / index build",
    )
    parts_head = table_row(
        "memories per agent",
        "query embedding (model)",
        "dense + BM25 (the store)",
        "SQL: which hits are live",
        "SQL: the agent's active days",
        "fusion and ranking",
    )
    write_section(
        "archival_latency",
        "Archival latency",
        f"""
{note}, {load} at the end (other jobs on the machine share its cores: quote medians). Qdrant Edge shard on
local disk, WAL on; SQLite state. Each size = that many memories for the searched agent plus as many for a second
agent in the same shard. Index (`runtime/memory/vectors/index.py`): no global graph (m = 0), one HNSW graph per
agent (payload_m {PLAN.payload_m}, ef_construct {PLAN.ef_construct}) on the tenant index `agent_id`, int8 scalar
quantization rescored with the originals ({PLAN.oversampling:g}× oversampling), hnsw_ef {PLAN.hnsw_ef}, payloads
in RAM once the shard holds {PLAN.payload_in_ram_from:,} points. An agent with fewer than
{PLAN.exact_below(DIM):,} memories in a segment (full_scan_threshold {PLAN.full_scan_threshold_kb:,} KB of 384-d
float32 vectors) is searched exactly; above, approximately; the newest ≤ {PLAN.indexing_points(DIM):,} points
(indexing_threshold {PLAN.indexing_threshold_kb:,} KB), not yet indexed, always exactly. Memories are filled with a
cheap word-vector embedder (see the module); every timed search and insert embeds with the shipped model
(≈ {embed_ms:.1f} ms per text here, one thread), so the times below include it. ms p50 / p95 over {args.queries}
searches per agent, 50 searches that count hits (as the tool does), 100 sequential inserts, and in brackets the
median CPU ms of the process per operation (all its threads; time spent waiting for a core held by another process
does not count, though on a busy VM it still runs high: compare each row with the model's own cost in the same
run); recall@10 of the dense index against exact search (queries like the memories / the model's query vectors);
{CONCURRENT} agents inserting at once (25 rounds).

{head}
| --- | --- | --- | --- | --- | --- | --- | --- |
{table}

Where a search's time goes (wall ms (CPU ms), medians of 100, the steps of `ArchivalSearch.ranked_page` timed one
by one; the store: the dense and keyword queries in one batch, then the keyword-only hits' cosine and payloads; the
agents here had no user message today, so every search reads their active days, which a turn after the day's first
user message skips):

{parts_head}
| --- | --- | --- | --- | --- | --- |
{parts}
{sweep}""",
    )


if __name__ == "__main__":
    main()
