"""Binary quantization against the plan's int8 for the archival index's graph walk (issue 11 item 3): two shards of
the same memories, one with the plan's int8 scalar quantization and one with Qdrant's 2-bit binary quantization and
8-bit queries (asymmetric), each searched per `hnsw_ef` and oversampling, rescored with the originals as the plan
does; recall@10 against exact search (queries like the memories / the model's query vectors) and the CPU ms of a
search of limit 10 plus one of limit 50 (the archival search's prefetch), the median.

The memories are bench.archival_latency's (its word-vector stand-in, two agents of `--size` each); only the
quantization differs.

    python -m bench.quantization_probe [--size 100000] [--no-write]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.archival_ab import ef_sweep
from bench.archival_latency import DIM, T0, WordVectors, bulk_load
from bench.common import machine_note, write_section
from pagemind.runtime.memory.archival.memory import ArchivalService
from pagemind.runtime.memory.embedding.cache import CachedEmbedder
from pagemind.runtime.memory.embedding.local_model import FastEmbedEmbedder
from pagemind.runtime.memory.vectors.edge import EdgeBackend
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.testing.clock import ManualClock

SWEEP = {
    "int8 (the plan)": [(500, 2.0), (800, 2.0)],
    "binary 2-bit, 8-bit queries": [(300, 4.0), (500, 2.0), (500, 4.0), (800, 4.0), (1200, 4.0)],
}


class BinaryBackend(EdgeBackend):
    """The plan's shard with 2-bit binary quantization and 8-bit queries instead of int8."""

    def _config(self) -> Any:
        qe, config = self.qe, super()._config()
        return qe.EdgeConfig(
            vectors=config.vectors,
            sparse_vectors=config.sparse_vectors,
            hnsw_config=config.hnsw_config,
            optimizers=config.optimizers,
            payload_memory=config.payload_memory,
            quantization_config=qe.BinaryQuantizationConfig(
                always_ram=True,
                encoding=qe.BinaryQuantizationEncoding.TwoBits,
                query_encoding=qe.BinaryQuantizationQueryEncoding.Scalar8Bits,
            ),
        )


def build(
    kind: type[EdgeBackend], home: Path, words: WordVectors, model: FastEmbedEmbedder, size: int
) -> tuple[EdgeBackend, float]:
    """A shard of two agents × `size` memories, indexed; and the index build's seconds."""
    backend = kind(home / "shard", DIM, auto_optimize=False)
    engine = make_engine(f"sqlite:///{home / 'state.db'}")
    for agent_id, seed in ((1, 1), (2, 2)):
        bulk_load(
            ArchivalService(
                agent_id,
                engine=engine,
                open_backend=lambda: backend,
                embedder=CachedEmbedder(model, engine),
                clock=ManualClock(T0),
            ),
            words,
            size,
            seed,
        )
    started = time.perf_counter()
    backend.optimize()
    return backend, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--size", type=int, default=100_000)
    parser.add_argument("--no-write", action="store_true", help="print only, leave RESULTS.md")
    args = parser.parse_args()
    note = machine_note()
    model = FastEmbedEmbedder()
    words = WordVectors(model)
    rng = np.random.default_rng(3)
    texts = [words.text(rng, 4) for _ in range(100)]
    queries = (words.embed(texts), np.vstack([model.embed_query(t) for t in texts[:50]]))
    lines = [
        "| quantization | hnsw_ef | oversampling | recall@10 | CPU ms (limit 10 + limit 50) | index build s |",
        "| --- | ---: | ---: | --- | ---: | ---: |",
    ]
    for (name, points), kind in zip(SWEEP.items(), (EdgeBackend, BinaryBackend), strict=True):
        with tempfile.TemporaryDirectory() as home:
            backend, build_s = build(kind, Path(home), words, model, args.size)
            rows = ef_sweep(backend, *queries, points=points, also_limit=50)
            lines += [
                f"| {name} | {r['ef']} | {r['oversampling']:g} | {r['recall']:.3f} / {r['recall_model']:.3f} | "
                f"{r['cpu_ms']:.2f} | {build_s:.0f} |"
                for r in rows
            ]
            backend.close()
    body = (
        f"{note}; `python -m bench.quantization_probe --size {args.size}`: two agents × {args.size:,} memories "
        "(bench.archival_latency's), the plan's graph (m 0, payload_m 32, ef_construct from the plan); 100 "
        "queries like the memories / 50 of the model's query vectors.\n\n" + "\n".join(lines) + "\n"
    )
    print(body)
    if not args.no_write:
        write_section("quantization_probe", "Binary quantization for the archival walk", body)


if __name__ == "__main__":
    main()
