"""The memory floor of an agent process's declared dependencies, with no pagemind code: a fresh process does only
what the libraries pagemind must use need to do their part of one agent's work, and its resident size (RSS) is
read after each step. What pagemind's own process measures (bench.agent_memory) is this floor plus pagemind.

The steps, each the least a library is asked for in pagemind's process:
- the interpreter with asyncio, ssl and json (what any asyncio HTTP client loads);
- numpy (vectors);
- SQLAlchemy and sqlmodel, with pydantic: a SQLite engine and one query;
- tiktoken's o200k_base (the default encoding), from the shipped file, with tiktoken's Python copy of the
  ranks dropped and the C heap trimmed, as lean as `pagemind.runtime.tokens` keeps it;
- an empty Qdrant Edge shard with pagemind's vectors (384-d dense, int8 copies in RAM; BM25 sparse), payloads
  on disk;
- fastembed's TextEmbedding on the shipped int8 all-MiniLM-L6-v2 (one thread), one sentence embedded;
- the openai SDK's AsyncOpenAI client and one chat completion posted to a local server (this module's parent process).

Each run is a fresh process; medians over `--runs`.

    python -m bench.dependency_floor [--runs 3] [--no-write]
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import json
import os
import statistics
import subprocess
import sys
import tempfile
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from bench.agent_memory import memory as rss
from bench.common import ROOT, bench_argv, machine_note, write_section

MODEL_DIR = ROOT / "runtime" / "data" / "models" / "all-MiniLM-L6-v2-onnx-int8"
TARGET_MB = 200
COMPLETION = {
    "id": "chatcmpl-1",
    "object": "chat.completion",
    "created": 0,
    "model": "local",
    "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": "Hello."}}],
    "usage": {"prompt_tokens": 5, "completion_tokens": 2, "total_tokens": 7},
}


def trim() -> None:
    """Give freed C heap back to the system (glibc), as pagemind does after loading the ranks and the model."""
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except OSError:
        pass


async def child(url: str, cache: str, home: str) -> list[dict]:
    """The measured process: each step, then its RSS."""
    steps: list[dict] = []

    def mark(name: str) -> None:
        steps.append({"step": name, **rss()})

    import ssl  # noqa: F401

    mark("the interpreter, asyncio, ssl, json")
    import numpy as np

    mark("numpy")
    import sqlalchemy
    import sqlmodel  # noqa: F401

    engine = sqlalchemy.create_engine(f"sqlite:///{home}/floor.db")
    with engine.connect() as conn:
        conn.execute(sqlalchemy.text("SELECT 1")).scalar()
    mark("SQLAlchemy, sqlmodel, pydantic: a SQLite engine, one query")
    import tiktoken
    from tiktoken_ext.openai_public import ENCODING_CONSTRUCTORS

    os.environ["TIKTOKEN_CACHE_DIR"] = cache  # seeded from the shipped file by the parent: no download
    fields = ENCODING_CONSTRUCTORS["o200k_base"]()
    encoding = tiktoken.Encoding(
        "o200k_base",
        pat_str=fields["pat_str"],
        mergeable_ranks=fields["mergeable_ranks"],
        special_tokens=fields["special_tokens"],
    )
    del fields, encoding._mergeable_ranks
    assert encoding.encode("hello world") == [24912, 2375]
    trim()
    mark("tiktoken o200k_base (Python ranks dropped)")
    import qdrant_edge as qe

    config = qe.EdgeConfig(
        vectors={"dense": qe.EdgeVectorParams(size=384, distance=qe.Distance.Cosine)},
        sparse_vectors={"bm25": qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
        quantization_config=qe.ScalarQuantizationConfig(type=qe.ScalarType.Int8, always_ram=True),
        payload_memory=qe.Memory.Cold,
    )
    shard = qe.EdgeShard.create(f"{home}/shard", config)
    shard.info()
    mark("Qdrant Edge: an empty shard")
    from fastembed import TextEmbedding

    model = TextEmbedding(
        "sentence-transformers/all-MiniLM-L6-v2", specific_model_path=str(MODEL_DIR), threads=1, lazy_load=False
    )
    vector = np.asarray(next(iter(model.embed(["The user is allergic to peanuts."]))))
    assert vector.shape == (384,)
    trim()
    mark("fastembed: the shipped model loaded, one text embedded")
    import httpx
    import openai

    client = openai.AsyncOpenAI(base_url=url, api_key="floor")
    answer = await client.post(
        "/chat/completions",
        body={"model": "local", "messages": [{"role": "user", "content": "Hi"}]},
        cast_to=httpx.Response,
    )
    assert answer.status_code == 200
    mark("the openai SDK: a client, one chat completion")
    shard.close()
    return steps


class Completion(BaseHTTPRequestHandler):
    """An OpenAI-compatible chat completion that answers at once."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("content-length", 0)))
        body = json.dumps(COMPLETION).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--no-write", action="store_true", help="print only, leave RESULTS.md")
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(child(*args.child))))
        return
    # the parent only: the child runs no pagemind code
    from pagemind.runtime.tokens import seed_cache as seed_tiktoken_cache

    server = ThreadingHTTPServer(("127.0.0.1", 0), Completion)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    runs = []
    with tempfile.TemporaryDirectory() as scratch:
        seed_tiktoken_cache("o200k_base", Path(scratch))  # where tiktoken looks for its download
        for n in range(args.runs):
            home = Path(scratch) / f"run{n}"
            home.mkdir()
            out = subprocess.run(
                bench_argv(sys.executable, "dependency_floor", "--child", url, scratch, str(home)),
                cwd=ROOT,
                check=True,
                capture_output=True,
                text=True,
            ).stdout
            runs.append(json.loads(out.strip().splitlines()[-1]))
    server.shutdown()
    print(write(runs, args.no_write))


def write(runs: list[list[dict]], no_write: bool) -> str:
    """The table of medians; into bench/RESULTS.md unless `no_write`."""
    lines = ["| step | RSS MB (Δ) | of it anonymous MB |", "| --- | --- | --- |"]
    before = 0.0
    for n, step in enumerate(runs[0]):
        total = statistics.median(r[n]["rss"] for r in runs)
        anonymous = statistics.median(r[n]["anonymous"] for r in runs)
        lines.append(f"| {step['step']} | {total:.1f} (+{total - before:.1f}) | {anonymous:.1f} |")
        before = total
    body = (
        f"{machine_note()}; {len(runs)} runs, each a fresh process; medians. RSS and its anonymous part from "
        "/proc/self/smaps_rollup after a garbage collection.\n\n"
        + "\n".join(lines)
        + f"\n\n**The declared dependencies alone, doing one agent's least: {before:.1f} MB** (target for the whole "
        f"process: ≤ {TARGET_MB} MB).\n"
    )
    if not no_write:
        write_section("dependency_floor", "Memory floor of the declared dependencies", body)
    return body


if __name__ == "__main__":
    main()
