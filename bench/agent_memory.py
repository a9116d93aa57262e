"""Memory per loaded agent: the process's RSS with 1, 100 and 1,000 idle agents loaded in it (as the daemon holds
them), all on one shared `StateStore` (SQLite), each under its own name, each compiled once (a prompt built, as
after a turn: the per-agent caches are filled). The shared parts (the embedding model, the Qdrant store, the model
client's connection pool) must cost once per process, not per agent; the script checks that they are one object.

    python bench/agent_memory.py [--agents 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.common import machine_note, write_section  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def rss_mb() -> float:
    """Resident set size of this process now, in MB (after a collection, so garbage does not count)."""
    gc.collect()
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmRSS in /proc/self/status")


async def measure(counts: list[int], home: Path) -> tuple[list[tuple[int, float]], dict[str, float], list[str]]:
    from pagemind.runtime.agent import Agent
    from pagemind.runtime.settings import Settings
    from pagemind.runtime.spec import load_spec
    from pagemind.runtime.state.store import StateStore

    settings = Settings.from_env()
    store = StateStore.open(settings.database_url)
    spec = load_spec(ROOT / "agents" / "companion.yaml")
    marks: dict[str, float] = {"imports and an open store": rss_mb()}
    agents, rows = [], []
    for count in counts:
        while len(agents) < count:
            agent = await Agent.load(spec.model_copy(update={"name": f"companion-{len(agents)}"}), store=store,
                                     settings=settings)
            agent.compile()
            agents.append(agent)
        rows.append((count, rss_mb()))
    first, last = agents[0], agents[-1]
    shared = {
        "embedder": first.recall.embedder is last.recall.embedder is last.archival.embedder,
        "vector store": first.archival._open_backend() is last.archival._open_backend(),
        "model client pool": first.model.client is last.model.client,
    }
    marks["+ the openai SDK and the endpoint's pool"] = rss_mb()
    marks["+ the embedding model loaded (once)"] = _load_embedder(first) or rss_mb()
    return rows, marks, [f"{name}: {'one object' if same else 'PER AGENT'}" for name, same in shared.items()]


def _load_embedder(agent) -> None:  # noqa: ANN001
    agent.recall.embedder.embed(["one sentence to load the model"])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--agents", type=int, default=1000)
    args = parser.parse_args()
    counts = sorted({1, min(100, args.agents), args.agents})
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.update(PAGEMIND_HOME=tmp, OPENAI_BASE_URL="http://127.0.0.1:9/v1")
        os.environ.pop("DATABASE_URL", None)
        from pagemind.runtime.logs import configure_logging

        configure_logging("ERROR")
        note = machine_note()
        rows, marks, shared = asyncio.run(measure(counts, Path(tmp)))
    for count, rss in rows:
        print(f"{count:>5} agents: RSS {rss:.1f} MB")
    base = rows[0][1]
    per_agent = (rows[-1][1] - rows[1][1]) / (rows[-1][0] - rows[1][0]) if len(rows) > 2 else float("nan")
    print(f"per agent {per_agent * 1024:.0f} KB; " + "; ".join(shared))
    table = "\n".join(f"| {count:,} | {rss:.1f} | {rss - base:+.1f} |" for count, rss in rows)
    write_section("Memory per agent (bench/agent_memory.py)", f"""
{note}. The companion agent loaded {rows[-1][0]:,} times under separate names in one process, on one shared
`StateStore` (SQLite), each compiled once (its prompt built, per-agent caches filled), all idle; RSS from
/proc after a garbage collection.

| loaded agents | RSS MB | vs 1 agent MB |
| --- | --- | --- |
{table}

Per idle loaded agent (from {rows[1][0]:,} to {rows[-1][0]:,}): **{per_agent * 1024:.0f} KB**. Process with imports and an
open store: {marks["imports and an open store"]:.1f} MB (the first compile adds the tiktoken encoding, once); after
the agents' first model client (the openai SDK imported, one pool): {marks["+ the openai SDK and the endpoint's pool"]:.1f} MB; with the
shipped embedding model loaded as well (once, on the first embedding): {marks["+ the embedding model loaded (once)"]:.1f} MB. Shared, checked by identity: {"; ".join(shared)}.
Target: ≤ 200 MB for the process plus ≤ 0.5 MB (512 KB) per idle loaded agent.
""")


if __name__ == "__main__":
    main()
