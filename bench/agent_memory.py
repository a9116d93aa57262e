"""Memory of an agent process, step by step, and per loaded agent: the process's resident size (RSS) as an agent
process builds up to fully working (imports, an open store, an agent compiled, the vector store, the embedding
model, a long text embedded, three turns with a model over HTTP), then with 100 and 1,000 idle agents loaded in it
(as the daemon holds them), all on one shared `StateStore` (SQLite), each compiled once. The shared parts (the embedding
model, the Qdrant store, the model client's connection pool) must cost once per process, not per agent; the
script checks that they are one object.

Each measurement runs in a fresh process (`--child`), so every step's delta is what that step costs a process
that has done the steps above it. With `--before PYTHON` (an interpreter whose `pagemind` is another checkout,
e.g. main's), both trees are measured in alternation and the table shows medians side by side; the embedding
CPU per text is measured in the same processes. One more child, run with tracemalloc, says how much of the
fully working process is Python objects.

    python -m bench.agent_memory [--agents 1000] [--runs 3] [--before ../base/.venv/bin/python]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LONG_TEXT = " ".join(
    f"On day {i} Lin walked the dog by the river and called her sister about the move." for i in range(40)
)  # ≈ 700 words: truncated at the model's 512 tokens, the longest input it takes
SHORT_TEXT = "Lin is allergic to peanuts and keeps an EpiPen in her bag."
MEDIUM_TEXT = " ".join(f"On day {i} Lin walked the dog by the river." for i in range(15))  # ≈ 170 tokens


def memory() -> dict[str, float]:
    """This process's RSS and its anonymous (heap, not file-backed) part, in MB, after a garbage collection."""
    gc.collect()
    fields = {}
    for line in Path("/proc/self/smaps_rollup").read_text().splitlines():
        name, _, rest = line.partition(":")
        if name in ("Rss", "Anonymous"):
            fields[name.lower()] = int(rest.split()[0]) / 1024
    return fields


class Marks:
    """RSS after each step, and the top-level packages each step imported."""

    def __init__(self) -> None:
        self.steps: list[dict] = []
        self._modules = set(sys.modules)

    def __call__(self, name: str) -> None:
        new = {m.split(".")[0] for m in set(sys.modules) - self._modules if not m.startswith("_")}
        self._modules = set(sys.modules)
        self.steps.append({"step": name, **memory(), "imported": sorted(new)})


async def child(agents: int, trace: bool) -> dict:
    """The measured process: one step at a time, a mark after each."""
    marks = Marks()
    if trace:
        import tracemalloc

        tracemalloc.start()
    marks("Python, the bench's own imports")
    import numpy  # noqa: F401

    marks("numpy")
    import sqlalchemy  # noqa: F401
    import sqlmodel  # noqa: F401

    marks("SQLAlchemy, sqlmodel (with pydantic)")
    from pagemind.runtime.agent import Agent
    from pagemind.runtime.process.logs import configure_logging
    from pagemind.runtime.process.settings import Settings
    from pagemind.runtime.spec.loading import load_spec
    from pagemind.runtime.state.store import StateStore

    configure_logging("ERROR")
    marks("the rest of pagemind.runtime.agent's imports")
    settings = Settings.from_env()
    store = StateStore.open(settings.database_url)
    spec = load_spec(ROOT / "agents" / "companion.yaml")
    marks("the store opened (a database already migrated)")
    from pagemind.runtime.tokens import encoding

    encoding("o200k_base")  # as the compiler asks for it (the same object)
    marks("tiktoken o200k_base loaded")
    first = await Agent.load(spec.model_copy(update={"name": "companion-0"}), store=store, settings=settings)
    first.compile()
    marks("one agent loaded and compiled")
    backend = first.archival._open_backend()
    marks("the vector store (Qdrant Edge) opened")
    import onnxruntime  # noqa: F401
    import tokenizers  # noqa: F401

    marks("onnxruntime and tokenizers imported")
    embedder = first.recall.embedder
    embedder.embed([SHORT_TEXT])
    marks("the embedding model loaded, one text embedded")
    embedder.embed([LONG_TEXT])
    marks("a 512-token text embedded")
    for text in ("Hi, I'm Lin.", "I moved to Lisbon last week.", "What do you remember about me?"):
        await first.send(text)
    client = first.model.client
    marks("three turns with a model (a local server): the openai SDK, one pool")
    rows = {1: memory()["rss"]}
    loaded = [first]
    for count in sorted({min(100, agents), agents} - {1}):
        while len(loaded) < count:
            agent = await Agent.load(
                spec.model_copy(update={"name": f"companion-{len(loaded)}"}), store=store, settings=settings
            )
            agent.compile()
            loaded.append(agent)
        rows[count] = memory()["rss"]
    last = loaded[-1]
    shared = {
        "embedder": first.recall.embedder is last.recall.embedder is last.archival.embedder,
        "vector store": backend is last.archival._open_backend(),
        "model client pool": client is last.model.client,
    }
    result = {"steps": marks.steps, "rows": rows, "shared": shared, "pagemind": _origin()}
    if trace:
        import tracemalloc

        result["python_heap_mb"] = tracemalloc.get_traced_memory()[0] / 2**20
        tracemalloc.stop()
    else:
        result["cpu_ms"] = {
            "short": _cpu_per_text(embedder.inner, SHORT_TEXT, 200),
            "medium": _cpu_per_text(embedder.inner, MEDIUM_TEXT, 40),
            "long": _cpu_per_text(embedder.inner, LONG_TEXT, 12),
        }
        result["rss_after_cpu"] = memory()["rss"]
        result["rss_after_concurrent"] = await _concurrent(embedder.inner)
    return result


def _cpu_per_text(model, text: str, count: int) -> float:
    """CPU ms per embedding of `text` (distinct texts, so no cache answers), the median of four rounds."""
    rounds = []
    for r in range(4):
        texts = [f"{text} ({r}.{i})" for i in range(count // 4)]
        start = time.process_time()
        for t in texts:
            model.embed([t])
        rounds.append((time.process_time() - start) * 1000 / len(texts))
    return statistics.median(rounds)


async def _concurrent(model) -> float:
    """RSS after three rounds of ten texts of 10 to 460 words embedded at once, in worker threads as agents do
    (`aembed`): each run in flight holds its own working memory."""
    from pagemind.runtime.memory.embedding.embedders import aembed

    for r in range(3):
        await asyncio.gather(*[aembed(model, [f"{r}.{i} " + "word " * (50 * i + 10)]) for i in range(10)])
    return memory()["rss"]


def _origin() -> str:
    import pagemind.runtime

    return str(Path(pagemind.runtime.__file__).resolve().parent.parent)


def run_child(python: str, url: str, agents: int, trace: bool = False) -> dict:
    """One measured process in a fresh home whose database an earlier process created (as a restart finds it)."""
    with tempfile.TemporaryDirectory() as home:
        env = {**os.environ, "PAGEMIND_HOME": home, "OPENAI_BASE_URL": url, "PAGEMIND_LOG_LEVEL": "ERROR"}
        env.pop("DATABASE_URL", None)
        command = [python, "-m", "bench.agent_memory"]  # this checkout's bench, `python`'s pagemind
        subprocess.run([*command, "--prepare"], env=env, cwd=ROOT, check=True)
        out = subprocess.run(
            [*command, "--child", str(agents), *(["--trace"] if trace else [])],
            env=env,
            cwd=ROOT,
            check=True,
            capture_output=True,
            text=True,
        ).stdout
        return json.loads(out.strip().splitlines()[-1])


def prepare() -> None:
    """Create and migrate the database, as an earlier run of the process would have."""
    from pagemind.runtime.process.settings import Settings
    from pagemind.runtime.state.store import StateStore

    StateStore.open(Settings.from_env().database_url)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--before", help="an interpreter whose pagemind is the tree to compare with")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--trace", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--prepare", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.prepare:
        return prepare()
    if args.child:
        print(json.dumps(asyncio.run(child(args.child, args.trace))))
        return None
    # Imported here, not at the top: the measured children run this module too, and their first mark is what
    # the module's own imports cost.
    from bench.common import machine_note

    note = machine_note()
    trees = {"after": sys.executable} | ({"before": args.before} if args.before else {})
    runs: dict[str, list[dict]] = {name: [] for name in trees}
    # The model: bench.step_overhead_http's instant OpenAI-compatible server (keep-alive, scripted send_message).
    server = subprocess.Popen(
        [sys.executable, "-m", "bench.step_overhead_http", "--serve"], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        url = f"http://127.0.0.1:{server.stdout.readline().strip()}/v1"
        for _ in range(args.runs):
            for name, python in trees.items():
                runs[name].append(run_child(python, url, args.agents))
        traced = run_child(sys.executable, url, min(args.agents, 100), trace=True)
    finally:
        server.kill()
        server.wait()
    from bench.agent_memory_report import report

    report(note, args, runs, traced)
    return None


if __name__ == "__main__":
    main()
