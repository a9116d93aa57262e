"""What a long text's embedding leaves in an agent process, by how fastembed's onnxruntime session is run: the
variants tried for issue 11 item 5 (process RSS), each in fresh processes, interleaved, medians and ratios.

- `fastembed as is`: main's way (the session's CPU arena keeps the peak of the longest text it ran);
- `arena off`: fastembed's own `enable_cpu_mem_arena=False`, the C heap trimmed after a long text;
- `shrink`: this tree's `onnx_arena.shrink_after_long_runs` (the arena gives its free chunks back after a run
  above 128 tokens, the C heap trimmed), glibc's malloc arenas left at their default;
- `shrink + 2 malloc arenas`: what `FastEmbedEmbedder` does (`onnx_arena.keep_model_memory_small`).

Every variant loads the shipped model as `FastEmbedEmbedder` does (threads=1, batch size 1) and embeds the same
texts; its vectors must equal the first variant's to the bit. Peak = the step's high-water mark (VmHWM, reset
before each step), the rest is RSS after the step.

    python -m bench.agent_memory_arena [--runs 3]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VARIANTS = ("fastembed as is", "arena off", "shrink", "shrink + 2 malloc arenas")
SHORT_TEXT = "Lin is allergic to peanuts and keeps an EpiPen in her bag."
LONG_TEXT = " ".join(
    f"On day {i} Lin walked the dog by the river and called her sister about the move." for i in range(40)
)  # truncated at the model's 512 tokens


def rss_mb() -> dict[str, float]:
    """RSS now and its high-water mark since the last call (which resets it), in MB."""
    status = dict(line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines())
    now, peak = (int(status[key].split()[0]) / 1024 for key in ("VmRSS", "VmHWM"))
    Path("/proc/self/clear_refs").write_text("5")
    return {"rss": now, "peak": peak}


def load(variant: str):
    """The shipped model as `FastEmbedEmbedder` loads it, run the variant's way."""
    from fastembed import TextEmbedding

    from pagemind.runtime.memory.embedding.local_model import DEFAULT_MODEL_DIR
    from pagemind.runtime.memory.embedding.onnx_arena import shrink_after_long_runs
    from pagemind.runtime.memory.embedding.profiles import MINILM
    from pagemind.runtime.process.heap import limit_malloc_arenas, release_free_memory

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    options = {"enable_cpu_mem_arena": False} if variant == "arena off" else {}
    model = TextEmbedding(
        MINILM.fastembed_name, specific_model_path=str(DEFAULT_MODEL_DIR), threads=1, lazy_load=False, **options
    )
    if variant.startswith("shrink"):
        shrink_after_long_runs(model)
    if variant == "shrink + 2 malloc arenas":
        limit_malloc_arenas()
    release_free_memory()
    return model


def child(variant: str) -> dict:
    """The measured process: load, a short text, a long one, CPU per text, ten texts at once from threads."""
    import numpy as np

    from pagemind.runtime.process.heap import release_free_memory

    rss_mb()
    model = load(variant)

    def embed(text: str) -> np.ndarray:
        vector = np.vstack(list(model.embed([text], batch_size=1)))
        if variant == "arena off" and len(text) > 600:  # no session wrapper here: trim after a long text
            release_free_memory()
        return vector

    out = {"loaded": rss_mb()}
    vectors = [embed(SHORT_TEXT)]
    out["short text"] = rss_mb()
    vectors.append(embed(LONG_TEXT))
    out["512-token text"] = rss_mb()
    out["cpu_ms"] = {"short": _cpu(embed, SHORT_TEXT, 100), "long": _cpu(embed, LONG_TEXT, 8)}
    out["after CPU rounds"] = rss_mb()

    async def at_once(round_: int) -> None:
        await asyncio.gather(*[asyncio.to_thread(embed, f"{round_}.{i} " + "word " * (50 * i + 10)) for i in range(10)])

    for r in range(3):
        asyncio.run(at_once(r))
    out["ten texts at once, 3 rounds"] = rss_mb()
    out["vectors"] = np.vstack(vectors).tobytes().hex()
    return out


def _cpu(embed, text: str, count: int) -> float:
    """CPU ms per embedding of distinct variants of `text`, the median of four rounds."""
    rounds = []
    for r in range(4):
        texts = [f"{text} ({r}.{i})" for i in range(count // 4)]
        start = time.process_time()
        for t in texts:
            embed(t)
        rounds.append((time.process_time() - start) * 1000 / len(texts))
    return statistics.median(rounds)


STEPS = ("loaded", "short text", "512-token text", "after CPU rounds", "ten texts at once, 3 rounds")


def report(note: str, runs: dict[str, list[dict]], count: int) -> str:
    """The section's body: per variant, RSS and peak after each step, CPU per text, ratios to fastembed as is."""
    med = {
        v: {s: {k: statistics.median(r[s][k] for r in rr) for k in ("rss", "peak")} for s in STEPS}
        for v, rr in runs.items()
    }
    cpu = {v: {k: statistics.median(r["cpu_ms"][k] for r in rr) for k in ("short", "long")} for v, rr in runs.items()}
    base = VARIANTS[0]
    reference = runs[base][0]["vectors"]
    same = {v: all(r["vectors"] == reference for r in rr) for v, rr in runs.items()}
    head = (
        "| variant | "
        + " | ".join(f"{s}: RSS (peak) MB" for s in STEPS)
        + " | CPU ms short / long"
        + " | vs as is: RSS after 512 tokens, long-text CPU, peak | vectors |"
    )
    lines = [head, "|" + " --- |" * (len(STEPS) + 4)]
    for v in runs:
        cells = [f"{med[v][s]['rss']:.1f} ({med[v][s]['peak']:.1f})" for s in STEPS]
        ratio = (
            f"{med[v]['512-token text']['rss'] / med[base]['512-token text']['rss']:.2f}, "
            f"{cpu[v]['long'] / cpu[base]['long']:.2f}, "
            f"{med[v]['512-token text']['peak'] / med[base]['512-token text']['peak']:.2f}"
        )
        lines.append(
            f"| {v} | "
            + " | ".join(cells)
            + f" | {cpu[v]['short']:.2f} / {cpu[v]['long']:.1f} | {ratio} | "
            + ("identical" if same[v] else "**DIFFER**")
            + " |"
        )
    return f"""
{note}; `python -m bench.agent_memory_arena --runs {count}`: {count} fresh processes per variant, interleaved,
medians. Each process loads the shipped model (fastembed, threads=1, batch size 1), embeds a short text, a
512-token one, {100} short and {8} long ones for CPU (median of four rounds, ms per text), then three rounds of ten
texts (10 to 460 words) at once in worker threads. RSS after each step, the step's peak (VmHWM) in brackets.
Vectors: the short and the long text's, compared to the bit with the first variant's.

{chr(10).join(lines)}
"""


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(args.child)))
        return
    # Imported here, not at the top: the measured children run this module too.
    from bench.common import machine_note, write_section

    note = machine_note()
    runs: dict[str, list[dict]] = {v: [] for v in VARIANTS}
    env = {**os.environ, "PAGEMIND_LOG_LEVEL": "ERROR", "HF_HUB_OFFLINE": "1"}
    for _ in range(args.runs):
        for variant in VARIANTS:
            out = subprocess.run(
                [sys.executable, "-m", "bench.agent_memory_arena", "--child", variant],
                env=env,
                cwd=ROOT,
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            runs[variant].append(json.loads(out.strip().splitlines()[-1]))
    body = report(note, runs, args.runs)
    print(body)
    write_section("agent_memory_arena", "Embedding memory by arena handling", body)


if __name__ == "__main__":
    main()
