"""Retrieval quality on LoCoMo: conversation_search (recall) and archival_search, BM25 vs dense vs hybrid.

For each conversation every turn is stored as a message (`Speaker: text`, at its session's date) through the
same code the kernel uses, and searched with the same `RecallService` that `conversation_search` calls; as a
second unit every turn is saved with the archival write path (`ArchivalService.insert`, what
`archival_memory_insert` calls; filed from the two turns before it, as the tool files from the latest two messages)
into an embedded Qdrant Edge shard and searched with `archival_search`'s ranking.
Each question with evidence is the query. Reported per category and overall (categories 1–4, as LoCoMo's
reference figures; 5 = adversarial is listed but not in the overall): hit@1/5/10, all@5 (every evidence turn in
the top 5), fraction of evidence turns in the top 5 and 10 (LoCoMo's R@k) and MRR.

    python -m bench.retrieval_locomo [--data PATH] [--json] [--units recall,archival] [--sweep] [--no-write]
                                     [--embedder MODEL_DIR]     # another ONNX model (bench.embedding_survey)

Tune only on the dev file (the default); the numbers that count come from other conversations via --data.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from bench import embedding_survey
from bench.common import LOCOMO, machine_note, write_section
from pagemind.runtime.memory.archival.memory import ArchivalService
from pagemind.runtime.memory.embedding.cache import CachedEmbedder
from pagemind.runtime.memory.embedding.local_model import FastEmbedEmbedder
from pagemind.runtime.memory.recall.memory import RecallService
from pagemind.runtime.memory.vectors.edge import EdgeBackend
from pagemind.runtime.messages import Message
from pagemind.runtime.process.logs import configure_logging
from pagemind.runtime.spec.agent import AgentSpec
from pagemind.runtime.spec.memory import ArchivalConfig
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.clock import ManualClock

DEFAULT_DATA = LOCOMO
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop", 5: "adversarial"}
OVERALL = (1, 2, 3, 4)
METRICS = ("hit@1", "hit@5", "hit@10", "all@5", "frac@5", "frac@10", "mrr")
MODES = ("bm25", "dense", "hybrid")
K = 10
CONTEXT_TURNS = 2  # an archival memory is filed from the turns just before it (the tool: the latest 2 messages)


@dataclass
class Turn:
    """One dialogue turn."""

    dia_id: str
    speaker: str
    text: str
    at: datetime


@dataclass
class Question:
    """One question with its evidence turns."""

    text: str
    evidence: list[str]
    category: int


@dataclass
class Conversation:
    """A LoCoMo sample: its turns in order and its questions."""

    sample_id: str
    speakers: tuple[str, str]
    turns: list[Turn]
    questions: list[Question]


def dia_ids(raw: Any) -> list[str]:
    """Evidence ids, parsed defensively ("D8:6; D9:17", space-joined lists, "D:11:26", "D30:05")."""
    found = re.findall(r"D:?(\d+):(\d+)", " ".join(map(str, raw if isinstance(raw, list) else [raw])))
    return list(dict.fromkeys(f"D{int(a)}:{int(b)}" for a, b in found))


def session_time(text: str) -> datetime:
    """LoCoMo's "1:56 pm on 8 May, 2023" as an aware datetime."""
    return datetime.strptime(text.strip(), "%I:%M %p on %d %B, %Y").replace(tzinfo=UTC)


def load(path: Path) -> list[Conversation]:
    """Every conversation of a LoCoMo-format file."""
    conversations = []
    for sample in json.loads(path.read_text()):
        conv, turns, n = sample["conversation"], [], 1
        while f"session_{n}" in conv:
            start = session_time(conv[f"session_{n}_date_time"])
            for i, t in enumerate(conv[f"session_{n}"]):
                text = t["text"] + (f" [shares a photo: {t['blip_caption']}]" if t.get("blip_caption") else "")
                [dia] = dia_ids(t["dia_id"]) or [t["dia_id"]]
                turns.append(Turn(dia, t["speaker"], text, start + timedelta(seconds=30 * i)))
            n += 1
        questions = [
            Question(q["question"], dia_ids(q["evidence"]), int(q["category"]))
            for q in sample["qa"]
            if dia_ids(q.get("evidence", []))
        ]
        conversations.append(
            Conversation(
                sample.get("sample_id", f"conv-{len(conversations)}"),
                (conv.get("speaker_a", ""), conv.get("speaker_b", "")),
                turns,
                questions,
            )
        )
    return conversations


def score(ranked: list[str], evidence: list[str]) -> dict[str, float]:
    """The metrics of one ranked list of dia ids against the evidence."""
    wanted = set(evidence)
    ranks = [n for n, d in enumerate(ranked) if d in wanted]
    first = ranks[0] if ranks else None
    return {
        "hit@1": float(first is not None and first < 1),
        "hit@5": float(first is not None and first < 5),
        "hit@10": float(first is not None and first < 10),
        "all@5": float(wanted <= set(ranked[:5])),
        "frac@5": len(wanted & set(ranked[:5])) / len(wanted),
        "frac@10": len(wanted & set(ranked[:10])) / len(wanted),
        "mrr": 1 / (first + 1) if first is not None else 0.0,
    }


class Tally:
    """Per-category sums of the metrics."""

    def __init__(self) -> None:
        self.sums: dict[int, dict[str, float]] = defaultdict(lambda: defaultdict(float))
        self.counts: dict[int, int] = defaultdict(int)

    def add(self, category: int, metrics: dict[str, float]) -> None:
        """Count one question's metrics in its category."""
        self.counts[category] += 1
        for name, value in metrics.items():
            self.sums[category][name] += value

    def table(self) -> dict[str, dict[str, float]]:
        """{"overall"|category name: {metric: mean, "n": count}}."""
        out: dict[str, dict[str, float]] = {}
        groups = {"overall": OVERALL, **{CATEGORIES[c]: (c,) for c in sorted(self.counts)}}
        for name, cats in groups.items():
            n = sum(self.counts[c] for c in cats)
            if n:
                out[name] = {m: round(sum(self.sums[c][m] for c in cats) / n, 3) for m in METRICS} | {"n": n}
        return out


Search = Callable[[str, str], Awaitable[list[str]]]


async def evaluate(conversations: list[Conversation], searchers: dict[str, Search]) -> dict[str, Tally]:
    """Run every question through every searcher (keyed by mode) of its conversation; also "hybrid:<sample id>",
    each conversation's hybrid tally (whether a change moves every conversation the same way)."""
    tallies = {mode: Tally() for mode in MODES} | {f"hybrid:{c.sample_id}": Tally() for c in conversations}
    for conv in conversations:
        for q in conv.questions:
            for mode in MODES:
                ranked = await searchers[conv.sample_id](q.text, mode)
                tallies[mode].add(q.category, score(ranked, q.evidence))
                if mode == "hybrid":
                    tallies[f"hybrid:{conv.sample_id}"].add(q.category, score(ranked, q.evidence))
    return tallies


def per_conversation(tallies: dict[str, Tally]) -> dict[str, dict[str, float]]:
    """{sample id: overall hybrid hit@5, frac@5, n} from `evaluate`'s per-conversation tallies."""
    out = {}
    for key, tally in tallies.items():
        if key.startswith("hybrid:") and "overall" in (table := tally.table()):
            out[key.split(":", 1)[1]] = {m: table["overall"][m] for m in ("hit@5", "frac@5", "n")}
    return out


# -- unit 1: recall (conversation_search) ---------------------------------------------------------------------


async def recall_unit(
    conversations: list[Conversation], embedder: CachedEmbedder, home: Path, config: ArchivalConfig
) -> tuple[dict[str, Search], dict[str, RecallService]]:
    """Store every turn as a message and return a search function per conversation."""
    store = StateStore(make_engine(f"sqlite:///{home / 'recall.db'}"))
    searchers, services = {}, {}
    for conv in conversations:
        spec = AgentSpec.model_validate({"name": conv.sample_id, "model": {"name": "none"}, "system": "bench"})
        record = store.ensure_agent(spec)
        roles = {conv.speakers[0]: "user"}
        messages = [
            Message(roles.get(t.speaker, "assistant"), f"{t.speaker}: {t.text}", t.at, in_context=False)
            for t in conv.turns
        ]
        stored = store.append_messages(record.id, messages)
        by_id = {m.id: t.dia_id for m, t in zip(stored, conv.turns, strict=True)}
        service = RecallService(
            record.id,
            engine=store.engine,
            embedder=embedder,
            config=config,
            clock=ManualClock(conv.turns[-1].at + timedelta(days=1)),
        )  # asked after the last turn
        service.catch_up(dense=True)
        services[conv.sample_id] = service

        async def search(
            question: str, mode: str, service: RecallService = service, by_id: dict[int, str] = by_id
        ) -> list[str]:
            hits = await service.search(question, limit=K, mode=mode)
            return [by_id[h.id] for h in hits]

        searchers[conv.sample_id] = search
    return searchers, services


# -- unit 2: archival (archival_memory_insert / archival_search) ----------------------------------------------


async def archival_unit(
    conversations: list[Conversation], embedder: CachedEmbedder, home: Path, config: ArchivalConfig
) -> tuple[dict[str, Search], dict[str, Any]]:
    """Save every turn through the archival write path and return a search function per conversation. Every turn
    is also in the agent's conversation log, as in the product (its user messages make the days it was in use:
    disuse decay counts those, `memory.activity`)."""
    engine = make_engine(f"sqlite:///{home / 'archival.db'}")
    state = StateStore(engine)
    backend = EdgeBackend(home / "qdrant", embedder.dim)
    searchers: dict[str, Search] = {}
    stats = {"turns": 0, "stored": 0, "duplicates": 0, "superseded": 0, "insert_s": 0.0}
    for conv in conversations:  # one agent per conversation
        spec = AgentSpec.model_validate({"name": conv.sample_id, "model": {"name": "none"}, "system": "bench"})
        record = state.ensure_agent(spec)
        roles = {conv.speakers[0]: "user"}
        logged = state.append_messages(
            record.id,
            [
                Message(roles.get(t.speaker, "assistant"), f"{t.speaker}: {t.text}", t.at, in_context=False)
                for t in conv.turns
            ],
        )
        clock = ManualClock(datetime.now(UTC))
        service = ArchivalService(
            record.id, engine=engine, open_backend=lambda: backend, embedder=embedder, config=config, clock=clock
        )
        by_memory: dict[str, list[str]] = defaultdict(list)
        started = time.perf_counter()
        for n, turn in enumerate(conv.turns):
            clock.now = turn.at
            # filed from the conversation just before it (the product: the messages before the tool call)
            before = [
                logged[j].id
                for j in range(max(0, n - CONTEXT_TURNS), n)
                if turn.at - conv.turns[j].at < timedelta(hours=6)
            ]
            result = await service.insert(f"{turn.speaker}: {turn.text}", kind="episode", source_message_ids=before)
            by_memory[result.id].append(turn.dia_id)
            stats["turns"] += 1
            stats["duplicates"] += result.action == "duplicate"
            stats["superseded"] += result.action == "superseded"
        stats["insert_s"] += time.perf_counter() - started
        clock.now = conv.turns[-1].at + timedelta(days=1)

        async def search(
            question: str, mode: str, service: ArchivalService = service, by_memory: dict[str, list[str]] = by_memory
        ) -> list[str]:
            hits = await service.search(question, top_k=K, mode=mode, count_hits=False)
            return [d for h in hits for d in by_memory[h.id]][:K]

        searchers[conv.sample_id] = search
    stats["stored"] = stats["turns"] - stats["duplicates"]
    return searchers, stats


# -- reporting ------------------------------------------------------------------------------------------------


def markdown(unit: str, tallies: dict[str, dict[str, dict[str, float]]]) -> str:
    """One table: rows = mode × group, columns = metrics."""
    head = "| unit | retriever | group | n | " + " | ".join(METRICS) + " |"
    rows = [head, "|" + " --- |" * (len(METRICS) + 4)]
    for mode in MODES:
        for group, values in tallies[mode].items():
            cells = " | ".join(f"{values[m]:.3f}" for m in METRICS)
            name = f"**{mode}**" if group == "overall" else mode
            rows.append(f"| {unit} | {name} | {group} | {values['n']} | {cells} |")
    return "\n".join(rows)


# Issue 14's targets (overall hit@5, fraction@5) and the recall figures per category when it was filed.
TARGETS = {"recall": (0.80, 0.72), "archival": (0.72, 0.65)}
RECALL_BEFORE_HIT5 = {"multi-hop": 0.576, "temporal": 0.800, "open-domain": 0.412, "single-hop": 0.792}


def check_targets(unit: str, table: dict[str, dict[str, dict[str, float]]]) -> list[str]:
    """The issue's targets for the default (hybrid) ranking of one unit, as lines saying met / missed."""
    hybrid, bm25 = table["hybrid"], table["bm25"]
    hit, frac = TARGETS[unit]
    lines = [
        f"{unit} hybrid hit@5 {hybrid['overall']['hit@5']:.3f} (target ≥ {hit}): "
        f"{'met' if hybrid['overall']['hit@5'] >= hit else 'MISSED'}",
        f"{unit} hybrid fraction@5 {hybrid['overall']['frac@5']:.3f} (target ≥ {frac}): "
        f"{'met' if hybrid['overall']['frac@5'] >= frac else 'MISSED'}",
    ]
    if unit == "recall":
        worse = [g for g, before in RECALL_BEFORE_HIT5.items() if hybrid[g]["hit@5"] <= before]
        lines.append(
            "recall hybrid hit@5 above the issue's figure in every category 1–4: "
            + ("met" if not worse else f"MISSED in {', '.join(worse)}")
        )
    worse = [
        g
        for g in hybrid
        if g != "overall" and (hybrid[g]["hit@5"] <= bm25[g]["hit@5"] or hybrid[g]["frac@5"] <= bm25[g]["frac@5"])
    ]
    lines.append(
        f"{unit} hybrid beats BM25 on hit@5 and fraction@5 in every category (adversarial included): "
        + ("met" if not worse else f"MISSED in {', '.join(worse)}")
    )
    return lines


SWEEP = [
    ("default", {}),
    ("dense_weight 0.3", {"dense_weight": 0.3}),
    ("dense_weight 0.4", {"dense_weight": 0.4}),
    ("dense_weight 0.6", {"dense_weight": 0.6}),
    ("dense_weight 0.7", {"dense_weight": 0.7}),
    ("recall_next_weight 0", {"recall_next_weight": 0.0}),
    ("recall_next_weight 0.1", {"recall_next_weight": 0.1}),
    ("recall_next_weight 0.3", {"recall_next_weight": 0.3}),
    ("recall_next_weight 0.4", {"recall_next_weight": 0.4}),
    ("recall_own_text_weight 0", {"recall_own_text_weight": 0.0}),
    ("recall_own_text_weight 0.3", {"recall_own_text_weight": 0.3}),
    ("recall_own_text_weight 2", {"recall_own_text_weight": 2.0}),
    ("min_similarity 0.4", {"min_similarity": 0.4}),
    ("min_keyword_score 2", {"min_keyword_score": 2.0}),
    ("recall_speaker_boost 0", {"recall_speaker_boost": 0.0}),
    ("recall_speaker_boost 0.15", {"recall_speaker_boost": 0.15}),
    ("recall_speaker_boost 0.2", {"recall_speaker_boost": 0.2}),
    ("recall_speaker_boost 0.4", {"recall_speaker_boost": 0.4}),
    ("recall_speaker_boost 0.6", {"recall_speaker_boost": 0.6}),
    ("recall_diversity 0", {"recall_diversity": 0.0}),
    ("recall_diversity 0.2", {"recall_diversity": 0.2}),
    ("recall_diversity 0.3", {"recall_diversity": 0.3}),
    ("recall_diversity 0.5", {"recall_diversity": 0.5}),
    ("recall_diversity 0.6", {"recall_diversity": 0.6}),
]
ARCHIVAL_SWEEP = [
    ("default", {}),
    ("recency_weight 0", {"recency_weight": 0.0}),
    ("recency_weight 0.3", {"recency_weight": 0.3}),
    ("dense_weight 0.3", {"dense_weight": 0.3}),
    ("dense_weight 0.4", {"dense_weight": 0.4}),
    ("dense_weight 0.6", {"dense_weight": 0.6}),
    ("dense_weight 0.7", {"dense_weight": 0.7}),
    ("neighbour_weight 0.1", {"neighbour_weight": 0.1}),
    ("neighbour_weight 0.2", {"neighbour_weight": 0.2}),
    ("neighbour_weight 0.2, 60 s", {"neighbour_weight": 0.2, "neighbour_seconds": 60.0}),
]


async def sweep(
    conversations: list[Conversation],
    searchers: dict[str, Search],
    services: dict[str, Any],
    base: ArchivalConfig,
    grid: list[tuple[str, dict[str, Any]]],
) -> str:
    """Hybrid hit@5 / fraction@5 / MRR (overall) for each knob setting: the evidence for the defaults."""
    rows = ["| setting | hit@5 | frac@5 | mrr |", "| --- | --- | --- | --- |"]
    for name, change in grid:
        for service in services.values():
            service.config = base.model_copy(update=change)
        tally = Tally()
        for conv in conversations:
            for q in conv.questions:
                tally.add(q.category, score(await searchers[conv.sample_id](q.text, "hybrid"), q.evidence))
        overall = tally.table()["overall"]
        rows.append(f"| {name} | {overall['hit@5']:.3f} | {overall['frac@5']:.3f} | {overall['mrr']:.3f} |")
    for service in services.values():
        service.config = base
    return "\n".join(rows)


def settings(items: list[str]) -> dict[str, Any]:
    """`--set` items as ArchivalConfig fields; a dotted name sets a nested one (`temporal.range_boost=0.3`)."""
    out: dict[str, Any] = {}
    for item in items:
        name, value = item.split("=", 1)
        *path, last = name.split(".")
        node = out
        for part in path:
            node = node.setdefault(part, {})
        node[last] = value
    return out


async def run(args: argparse.Namespace) -> dict[str, Any]:
    """Both units (and the sweeps), the RESULTS.md block, and the figures as one dict."""
    conversations = load(Path(args.data))
    config = ArchivalConfig(**settings(args.set))
    cache_path = Path(args.cache)
    cache_path.parent.mkdir(parents=True, exist_ok=True)
    cache_engine = make_engine(f"sqlite:///{cache_path}")
    embedder = (
        embedding_survey.cached(args.embedder, cache_engine)
        if args.embedder
        else CachedEmbedder(FastEmbedEmbedder(), cache_engine)
    )
    result: dict[str, Any] = {"data": str(args.data), "questions": sum(len(c.questions) for c in conversations)}
    sections: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        if "recall" in args.units:
            started = time.perf_counter()
            searchers, services = await recall_unit(conversations, embedder, home, config)
            tallies = await evaluate(conversations, searchers)
            result["recall"] = {mode: tallies[mode].table() for mode in MODES}
            result["recall_conversations"] = per_conversation(tallies)
            result["recall_seconds"] = round(time.perf_counter() - started, 1)
            result["targets"] = check_targets("recall", result["recall"])
            title = "### conversation_search (recall: SQLite FTS5 + dense)"
            sections.append(f"{title}\n\n" + markdown("recall", result["recall"]))
            sections.append("\n".join(f"- {line}" for line in result["targets"]))
            if args.sweep:
                sections.append(
                    "Knob sweep, hybrid, overall (each row changes one default):\n\n"
                    + await sweep(conversations, searchers, services, config, SWEEP)
                )
        if "archival" in args.units:
            started = time.perf_counter()
            searchers, stats = await archival_unit(conversations, embedder, home, config)
            tallies = await evaluate(conversations, searchers)
            result["archival"] = {mode: tallies[mode].table() for mode in MODES}
            result["archival_conversations"] = per_conversation(tallies)
            result["archival_stats"] = stats | {"seconds": round(time.perf_counter() - started, 1)}
            sections.append(
                "### archival_search (every turn via archival_memory_insert, Qdrant Edge)\n\n"
                + markdown("archival", result["archival"])
            )
            result["archival_targets"] = check_targets("archival", result["archival"])
            sections.append("\n".join(f"- {line}" for line in result["archival_targets"]))
            sections.append(
                f"Write path: {stats['turns']} turns → {stats['stored']} memories "
                f"({stats['duplicates']} refreshed as near-duplicates, {stats['superseded']} superseded); "
                f"insert time {stats['insert_s']:.1f} s in all."
            )
            if args.sweep:
                result["archival_sweep"] = await archival_sweep(conversations, searchers, config)
                sections.append("Archival knob sweep, hybrid, overall:\n\n" + result["archival_sweep"])
    result["embeddings_computed"] = embedder.computed
    if not args.no_write and not args.embedder:  # the section describes the shipped model
        write_section(
            "retrieval_locomo",
            "Retrieval on LoCoMo",
            f"""
{machine_note()}; data `{Path(args.data).name}` ({len(conversations)} conversations, {result["questions"]} questions
with evidence). Embeddings: all-MiniLM-L6-v2 int8 ONNX (shipped). Overall = categories 1–4 (LoCoMo's reference
set); adversarial (5) listed separately. Each turn is stored as `Speaker: text` at its session date; the recall
index keys it as `[date] role: Speaker: text` with the two turns before it (dense: the one before); the archival
unit files each turn from the two turns before it in its session (source messages, whose words its keyword index
adds). Tuned on the dev file only.

"""
            + "\n\n".join(sections),
        )
    return result


async def archival_sweep(conversations: list[Conversation], searchers: dict[str, Search], base: ArchivalConfig) -> str:
    """The archival knob sweep (the services are reached through the search closures' defaults)."""
    services = {cid: search.__defaults__[0] for cid, search in searchers.items()}  # type: ignore[index]
    return await sweep(conversations, searchers, services, base, ARCHIVAL_SWEEP)


def main() -> None:
    """Command line entry point."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--data", default=str(DEFAULT_DATA), help="a LoCoMo-format JSON file")
    parser.add_argument("--json", action="store_true", help="print one JSON object with all figures, last line")
    parser.add_argument("--units", default="recall,archival", help="recall, archival or both")
    parser.add_argument("--sweep", action="store_true", help="also evaluate one-knob changes of the defaults")
    parser.add_argument("--cache", default=".pagemind/bench-embeddings.db", help="embedding cache (SQLite)")
    parser.add_argument("--no-write", action="store_true", help="do not update bench/RESULTS.md")
    parser.add_argument(
        "--embedder",
        metavar="DIR",
        help="a model folder for bench.embedding_survey instead of the "
        "shipped model (measurement only; RESULTS.md is then not written)",
    )
    parser.add_argument(
        "--set",
        action="append",
        default=[],
        metavar="KNOB=VALUE",
        help="override an ArchivalConfig default, e.g. --set dense_weight=0.4 (repeatable)",
    )
    args = parser.parse_args()
    args.units = set(args.units.split(","))
    configure_logging("ERROR")
    result = asyncio.run(run(args))
    for unit in ("recall", "archival"):
        for mode in MODES:
            if unit in result:
                o = result[unit][mode]["overall"]
                print(f"{unit:<8} {mode:<6} " + " ".join(f"{m} {o[m]:.3f}" for m in METRICS), file=sys.stderr)
    for line in result.get("targets", []):
        print(line, file=sys.stderr)
    if args.json:
        print(json.dumps(result))


if __name__ == "__main__":
    main()
