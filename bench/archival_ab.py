"""Archival search and insert, before → after a change, in one run: bench.archival_latency's measurement at one
size, run alternately on an older tree (a git revision, exported) and on this one, each run a fresh process, so
both see the same load; medians over the rounds, and the ratio after / before. Also `ef_sweep`, the recall@10 and
cost of the dense search per `hnsw_ef`, which bench.archival_latency --sweep adds to its rows.

    python -m bench.archival_ab --before 3f27148 [--size 30000] [--rounds 2] [--queries 100] [--no-write]

The older tree is `git archive REV` in a temporary folder, imported in place of this tree's `pagemind` (PYTHONPATH);
both run this tree's bench.archival_latency, so they are measured the same way.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from bench.common import ROOT, bench_argv, machine_note, median, write_section

SWEEP_EF = (160, 256, 400, 600, 800)


def ef_sweep(
    backend: Any,
    like_memories: np.ndarray,
    model_queries: np.ndarray,
    agent_id: int = 1,
    points: Sequence[tuple[int, float]] | None = None,
    also_limit: int | None = None,
) -> list[dict]:
    """Per (hnsw_ef, oversampling) in `points` (default: `SWEEP_EF` at the plan's oversampling): mean recall@10 of the
    dense index against exact search (queries like the memories / the model's query vectors) and the median CPU ms
    of one such search (limit 10, rescored with the originals), plus one of `also_limit` when given."""
    from pagemind.runtime.memory.vectors.edge_filter import to_edge_filter
    from pagemind.runtime.memory.vectors.records import DENSE, MemoryFilter

    qe, plan = backend.qe, backend.plan
    flt = to_edge_filter(agent_id, MemoryFilter())

    def ids(vector: np.ndarray, params: Any, limit: int = 10) -> set:
        request = qe.QueryRequest(
            limit=limit,
            query=qe.Query.Nearest(np.asarray(vector, dtype=np.float32).tolist(), using=DENSE),
            filter=flt,
            with_payload=False,
            with_vector=False,
            params=params,
        )
        return {p.id for p in backend.shard.query(request)}

    exact = [[ids(v, qe.SearchParams(exact=True)) for v in vectors] for vectors in (like_memories, model_queries)]
    rows = []
    for ef, oversampling in points or [(ef, plan.oversampling) for ef in SWEEP_EF]:
        params = qe.SearchParams(
            hnsw_ef=ef, quantization=qe.QuantizationSearchParams(rescore=True, oversampling=oversampling)
        )
        found, cpu = [], []
        for vectors, truth in zip((like_memories, model_queries), exact, strict=True):
            share = []
            for vector, want in zip(vectors, truth, strict=True):
                started = time.process_time()
                got = ids(vector, params)
                if also_limit is not None:
                    ids(vector, params, also_limit)
                cpu.append((time.process_time() - started) * 1000)
                share.append(len(got & want) / max(1, len(want)))
            found.append(float(np.mean(share)))
        rows.append(
            {
                "ef": ef,
                "oversampling": oversampling,
                "recall": found[0],
                "recall_model": found[1],
                "cpu_ms": median(cpu),
            }
        )
    return rows


def export(revision: str, into: Path) -> Path:
    """`git archive` of `revision` under `into`, and a folder to put on PYTHONPATH that imports it as `pagemind`."""
    tree = into / "tree"
    tree.mkdir()
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", revision], check=True, capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(tree)], input=archive, check=True)
    package = into / "path" / "pagemind"
    package.mkdir(parents=True)
    for name in ("runtime", "tools", "blocks", "scheduler"):
        (package / name).symlink_to(tree / name)
    return into / "path"


def one_run(size: int, queries: int, pythonpath: Path | None, out: Path) -> dict:
    """bench.archival_latency at one size in a fresh process (on the older tree when `pythonpath` is given)."""
    env = dict(os.environ)
    if pythonpath is not None:
        env["PYTHONPATH"] = str(pythonpath)
    subprocess.run(
        bench_argv(
            sys.executable, "archival_latency", "--sizes", str(size), "--queries", str(queries), "--json", str(out)
        ),
        check=True,
        env=env,
        cwd=ROOT,
    )
    return json.loads(out.read_text())


METRICS = (
    ("search", "archival_search"),
    ("search2", "second agent's search"),
    ("search_hits", "search counting hits (as the tool)"),
    ("insert", "insert (sequential)"),
    ("concurrent", "8 concurrent inserts (group commit)"),
)
PARTS = (
    ("embed", "… query embedding (model)"),
    ("retrieve", "… dense + BM25 (the store)"),
    ("sql", "… SQL: which hits are live"),
    ("activity", "… SQL: the agent's active days"),
    ("rank", "… fusion and ranking"),
)


def section(note: str, revision: str, size: int, runs: dict[str, list[dict]]) -> str:
    """The RESULTS.md block: before and after side by side, medians over the rounds."""

    def rows(side: str) -> list[dict]:
        return [r["rows"][0] for r in runs[side]]

    def pooled(side: str, key: str) -> tuple[float, float | None]:
        wall = [x for r in rows(side) for x in r[key]]
        cpu = [x for r in rows(side) for x in r.get(key + "_cpu", [])]
        return median(wall), (median(cpu) if cpu else None)

    lines = []
    for key, label in METRICS:
        (bw, bc), (aw, ac) = pooled("before", key), pooled("after", key)
        cpu = f" ({bc:.1f} → {ac:.1f} CPU, ×{ac / bc:.2f})" if bc and ac else ""
        lines.append(f"| {label} | {bw:.1f} | {aw:.1f} | ×{aw / bw:.2f}{cpu} |")
    for key, label in PARTS:
        b = median([r["parts"][key][1] for r in rows("before")])
        a = median([r["parts"][key][1] for r in rows("after")])
        lines.append(f"| {label}, CPU | {b:.2f} | {a:.2f} | ×{a / b:.2f} |")
    for key, label in (
        ("recall", "recall@10, queries like the memories"),
        ("recall_model", "recall@10, the model's query vectors"),
    ):
        b, a = median([r[key] for r in rows("before")]), median([r[key] for r in rows("after")])
        lines.append(f"| {label} | {b:.3f} | {a:.3f} | |")
    build = [median([r["build_s"] for r in rows(side)]) for side in ("before", "after")]
    lines.append(f"| index build, s | {build[0]:.0f} | {build[1]:.0f} | ×{build[1] / build[0]:.2f} |")
    loads = ", ".join(f"{side} {r['load_end']}" for side in ("before", "after") for r in runs[side])
    table = "\n".join(lines)
    return f"""
{note}; load average at the end of each run: {loads}. Other helpers' benchmarks and test runs shared the 2 cores.
{size:,} memories per agent (and as many for a second agent), measured by bench.archival_latency (see its
section for how), in {len(runs["after"])} rounds of fresh processes alternating before ({revision}, exported) and
after (this tree); ms p50 over the pooled samples, and for CPU the median CPU ms of the process per operation.

| {size:,} memories per agent | before: wall ms p50 | after | after / before |
| --- | --- | --- | --- |
{table}
"""


def main() -> None:
    """Command line entry point."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--before", required=True, help="the git revision to compare with (exported, not checked out)")
    parser.add_argument("--size", type=int, default=30_000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--no-write", action="store_true", help="print only, leave RESULTS.md")
    args = parser.parse_args()
    note = machine_note()
    runs: dict[str, list[dict]] = {"before": [], "after": []}
    with tempfile.TemporaryDirectory() as tmp:
        older = export(args.before, Path(tmp))
        for n in range(args.rounds):
            for side in ("before", "after") if n % 2 == 0 else ("after", "before"):
                runs[side].append(
                    one_run(
                        args.size, args.queries, older if side == "before" else None, Path(tmp) / f"{side}-{n}.json"
                    )
                )
                print(
                    side, n, {k: runs[side][-1]["rows"][0][k] for k in ("parts", "recall", "recall_model")}, flush=True
                )
    body = section(note, args.before, args.size, runs)
    print(body)
    if not args.no_write:
        write_section("archival_ab", f"Archival search before → after at {args.size:,} per agent", body)


if __name__ == "__main__":
    main()
