"""What encryption at rest costs: per step and per search, with a data key and without, in one run.

Two agents (agents/companion.yaml) over their own SQLite files and vector stores, one with a data key
(`PAGEMIND_ENCRYPTION_KEY`) and one without, take turns (interleaved, the order alternating, so machine noise hits
both alike). A step: store the user message, compile, an instant model's `send_message`, commit, a trace line per
event (sealed with the key). Then each agent gets the same archival memories, and searches: archival (hybrid:
dense and keyword, the payloads opened, the query's terms blinded) and recall (the full-text index, blinded).
Medians of wall milliseconds; the ratio is on ÷ off. The cipher's own cost per KB is timed apart.

    python -m bench.encryption [--turns 300] [--memories 300] [--searches 200]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
import timeit
from pathlib import Path
from typing import Any

from bench.common import machine_note, median, percentile, write_section
from pagemind.runtime.agent import Agent
from pagemind.runtime.crypto.cipher import TextCipher
from pagemind.runtime.crypto.keys import Encryption, new_key_text, parse_key
from pagemind.runtime.memory.vectors.stores import close_all
from pagemind.runtime.model.client import ModelRequest
from pagemind.runtime.process.logs import configure_logging
from pagemind.runtime.process.settings import Settings
from pagemind.runtime.spec.loading import load_spec
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.models import FunctionModel
from pagemind.runtime.testing.responses import reply_body, tool_call_body
from pagemind.runtime.trace.recorder import record

TOPICS = ["tea", "the harbour", "her sister", "the new job", "a broken bike", "the piano", "the garden", "a trip"]


def answer(request: ModelRequest) -> dict[str, Any]:
    """An instant model: summaries and extraction for the pressure monitor, send_message for steps."""
    if request.purpose != "step":
        return reply_body("Earlier: small talk." if request.purpose == "summarize" else '{"facts": []}')
    return tool_call_body("send_message", {"message": "ok, noted"}, "c1")


async def _agent(home: Path, key: str | None) -> tuple[Agent, Any]:
    settings = Settings(home=home, database_url=f"sqlite:///{home / 'pagemind.db'}", encryption_key=key)
    store = StateStore.open(settings.database_url, Encryption.of(settings))
    agent = await Agent.load(
        load_spec("agents/companion.yaml"), model=FunctionModel(answer), store=store, settings=settings
    )
    return agent, record(agent, directory=home / "traces")


async def _timed(work: Any) -> float:
    started = time.perf_counter()
    await work
    return (time.perf_counter() - started) * 1000


async def measure(turns: int, memories: int, searches: int, root: Path) -> dict[str, dict[str, list[float]]]:
    """Wall ms per step, per archival search and per recall search, for "on" and "off"."""
    agents = {}
    for side, key in (("off", None), ("on", new_key_text())):
        (root / side).mkdir()
        agents[side] = await _agent(root / side, key)
    times: dict[str, dict[str, list[float]]] = {side: {"step": [], "archival": [], "recall": []} for side in agents}
    order = ["off", "on"]
    for n in range(turns):
        for side in order if n % 2 else reversed(order):
            text = f"Turn {n}: Lin talked about {TOPICS[n % len(TOPICS)]} and how the day went."
            times[side]["step"].append(await _timed(agents[side][0].send(text)))
    facts = [f"Lin mentioned {TOPICS[i % len(TOPICS)]} on day {i}, fact number {i}." for i in range(memories)]
    for agent, _ in agents.values():
        assert agent.archival is not None
        for fact in facts:
            await agent.archival.insert(fact)
    for n in range(searches):
        query = f"what did Lin say about {TOPICS[n % len(TOPICS)]} on day {n % memories}"
        for side in order if n % 2 else reversed(order):
            agent = agents[side][0]
            assert agent.archival is not None and agent.recall is not None
            times[side]["archival"].append(await _timed(agent.archival.search(query, count_hits=False)))
            times[side]["recall"].append(await _timed(agent.recall.search(query)))
    for agent, recorder in agents.values():
        recorder.close()
        agent.store.engine.dispose()
    close_all()
    return times


def cipher_costs() -> dict[str, float]:
    """Microseconds to seal and to open 1 KB of text, and to blind one term."""
    cipher = TextCipher(parse_key(new_key_text(), "bench"), b"\x00" * 32)
    text = "x" * 1024
    sealed = cipher.seal(text)
    runs = 20000
    return {
        "seal 1 KB": timeit.timeit(lambda: cipher.seal(text), number=runs) / runs * 1e6,
        "open 1 KB": timeit.timeit(lambda: cipher.open(sealed), number=runs) / runs * 1e6,
        "blind a term (first time)": _first_blinds(cipher),
    }


def _first_blinds(cipher: TextCipher) -> float:
    """Microseconds to blind a term not blinded before (each cipher remembers the terms it blinded)."""
    terms = [f"term{n}" for n in range(5000)]
    started = time.perf_counter()
    for term in terms:
        cipher.blind(term)
    return (time.perf_counter() - started) / len(terms) * 1e6


def table(times: dict[str, dict[str, list[float]]], costs: dict[str, float]) -> str:
    """The RESULTS.md block's body."""
    rows = [
        "| operation | off: median ms | on: median ms | on ÷ off | off p90 | on p90 |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    names = {"step": "step (send_message, trace recorded)", "archival": "archival search (hybrid)"}
    names["recall"] = "recall search (full text + dense)"
    for what, label in names.items():
        off, on = times["off"][what], times["on"][what]
        rows.append(
            f"| {label} | {median(off):.2f} | {median(on):.2f} | {median(on) / median(off):.2f} | "
            f"{percentile(off, 90):.2f} | {percentile(on, 90):.2f} |"
        )
    micro = ", ".join(f"{name} {value:.1f} µs" for name, value in costs.items())
    return "\n".join(rows) + f"\n\nThe cipher alone: {micro}.\n"


def main() -> None:
    """Run the benchmark and write its table into bench/RESULTS.md."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--turns", type=int, default=300)
    parser.add_argument("--memories", type=int, default=300)
    parser.add_argument("--searches", type=int, default=200)
    args = parser.parse_args()
    configure_logging("WARNING")
    note = machine_note()
    with tempfile.TemporaryDirectory(prefix="bench-encryption-") as tmp:
        times = asyncio.run(measure(args.turns, args.memories, args.searches, Path(tmp)))
    body = table(times, cipher_costs())
    counts = f"{args.turns} steps, {args.memories} memories, {args.searches} searches per side"
    write_section(
        "encryption",
        "Encryption at rest: cost per step and per search",
        f"`python -m bench.encryption` ({counts}; SQLite, embedded vector store, one run, interleaved; "
        f"{note}).\n\n{body}",
    )
    print(body)


if __name__ == "__main__":
    main()
