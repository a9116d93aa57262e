"""The `bench.agent_memory` block of bench/RESULTS.md, from its children's measurements (medians of runs)."""

from __future__ import annotations

import statistics
from typing import Any

from bench.common import write_section

SECTION = "Memory per agent"
TARGET_MB = 200.0


def _median(values: list[float]) -> float:
    return statistics.median(values)


def _steps(runs: list[dict]) -> list[dict[str, Any]]:
    """Per step: the median RSS, the median delta from the step before, the median anonymous part."""
    names = [s["step"] for s in runs[0]["steps"]]
    out = []
    for i, name in enumerate(names):
        rss = [r["steps"][i]["rss"] for r in runs]
        delta = [r["steps"][i]["rss"] - (r["steps"][i - 1]["rss"] if i else 0) for r in runs]
        anon = [r["steps"][i]["anonymous"] for r in runs]
        out.append(
            {
                "step": name,
                "rss": _median(rss),
                "delta": _median(delta),
                "anon": _median(anon),
                "imported": runs[0]["steps"][i]["imported"],
            }
        )
    return out


def _imports(names: list[str], limit: int = 6) -> str:
    shown = [n for n in names if n not in {"pagemind", "bench"}]
    return ", ".join(shown[:limit]) + (f" and {len(shown) - limit} more" if len(shown) > limit else "")


def report(note: str, args: Any, runs: dict[str, list[dict]], traced: dict) -> None:
    """Print the numbers and write the section."""
    after = _steps(runs["after"])
    before = _steps(runs["before"]) if "before" in runs else None
    rows = {int(k): _median([r["rows"][k] for r in runs["after"]]) for k in runs["after"][0]["rows"]}
    counts = sorted(rows)
    per_agent = (rows[counts[-1]] - rows[counts[-2]]) / (counts[-1] - counts[-2]) if len(counts) > 2 else float("nan")
    working = after[-1]["rss"]
    head = "| step | " + ("before: RSS MB (Δ) | " if before else "") + "RSS MB (Δ) | of it anonymous MB | imported |"
    lines = [head, "| --- | " + ("--- | " if before else "") + "--- | --- | --- |"]
    for i, step in enumerate(after):
        was = before[i] if before else None
        imported = _imports(step["imported"])
        if was is not None and was["imported"] != step["imported"]:
            imported += f" (before: {_imports(was['imported'])})" if was["imported"] else " (before: nothing)"
        cells = [step["step"]] + ([f"{was['rss']:.1f} ({was['delta']:+.1f})"] if was else [])
        cells += [f"{step['rss']:.1f} ({step['delta']:+.1f})", f"{step['anon']:.1f}", imported or "–"]
        lines.append("| " + " | ".join(cells) + " |")
    table = "\n".join(lines)
    agents = "\n".join(f"| {count:,} | {rss:.1f} | {rss - rows[1]:+.1f} |" for count, rss in rows.items())
    cpu = {
        name: {kind: _median([r["cpu_ms"][kind] for r in rr]) for kind in ("short", "medium", "long")}
        for name, rr in runs.items()
    }
    after_cpu = _median([r["rss_after_cpu"] for r in runs["after"]])
    shared = "; ".join(f"{k}: {'one object' if v else 'PER AGENT'}" for k, v in runs["after"][0]["shared"].items())
    sizes = (("short", "a 14-token text"), ("medium", "a 170-token one"), ("long", "a 512-token one"))
    cpu_line = f"CPU per embedding, in the same processes (median of {args.runs} × 4 rounds): " + ", ".join(
        f"{label} {cpu['after'][kind]:.2f} ms" for kind, label in sizes
    )
    compare = ""
    if before:
        cpu_line += (
            " (before: "
            + ", ".join(f"{cpu['before'][kind]:.2f}" for kind, _ in sizes)
            + " ms; after/before "
            + ", ".join(f"{cpu['after'][kind] / cpu['before'][kind]:.2f}" for kind, _ in sizes)
            + ")"
        )
        was_working = before[-1]["rss"]
        compare = (
            f" Before ({runs['before'][0]['pagemind']}): **{was_working:.1f} MB** ({before[-1]['anon']:.1f} MB "
            f"anonymous), so the change saves {was_working - working:.1f} MB ({working / was_working:.2f}×)."
        )
    concurrent = {name: _median([r["rss_after_concurrent"] for r in rr]) for name, rr in runs.items()}
    rss_cpu = (
        f"RSS after those 252 embeddings (with all agents loaded): {after_cpu:.1f} MB; after three rounds of "
        f"ten texts (10 to 460 words) embedded at once in worker threads: {concurrent['after']:.1f} MB"
        + (f" (before: {concurrent['before']:.1f} MB)." if before else ".")
    )
    body = f"""
{note}; {args.runs} runs per tree, interleaved, each in a fresh process whose database an earlier process created
(a fresh database's first open also loads Alembic and its templates: ≈ 14 MB, once per database). RSS and its
anonymous part from /proc/self/smaps_rollup after a garbage collection; medians. The rest of RSS is file-backed:
the shared libraries' pages in use (onnxruntime, Qdrant Edge, numpy's BLAS, tiktoken, pydantic-core …), shared
with every other process that maps them.

{table}

**Fully working (the embedding model loaded, a 512-token text embedded, three turns with a model):
{working:.1f} MB** (target ≤ {TARGET_MB:.0f} MB: {"met" if working <= TARGET_MB else "not met"}), of which
{after[-1]["anon"]:.1f} MB anonymous (private to the process; the rest is shared library pages).{compare}
Python objects in it (tracemalloc, a separate run with {min(args.agents, 100)} agents):
{traced["python_heap_mb"]:.1f} MB.
{cpu_line}. {rss_cpu}

| loaded agents | RSS MB | vs 1 agent MB |
| --- | --- | --- |
{agents}

Per idle loaded agent (from {counts[-2]:,} to {counts[-1]:,}): **{per_agent * 1024:.0f} KB** (target ≤ 512 KB).
Shared, checked by identity: {shared}.
"""
    print(body)
    write_section("agent_memory", SECTION, body)
