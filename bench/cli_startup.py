"""How long the `pagemind` command takes to start: `--help`, `agents`, and a one-turn `run` against an instant model.

Each command runs as a fresh process (the installed console script, the way a user starts it), `--runs` times,
interleaved with a bare `python -c pass` so machine noise hits all alike; the table gives medians of the wall time,
its ratio to the bare interpreter, and the process's CPU time (user + system), in which time spent waiting for a
core does not count. The model is a local OpenAI-compatible server in another process (stdlib `ThreadingHTTPServer`,
HTTP/1.1 keep-alive) that answers every chat request at once with a scripted `send_message` tool call (or a plain
reply when no tools are offered). For the run, the model's share is its round trip as the client saw it (the
`latency_ms` of each `model_response` event in the run's trace) and "own time" is total − model; the time the
server spent in its handler is reported beside it. `--baseline` times a second installation (another checkout's
virtual environment) in the same rounds.

    python -m bench.cli_startup [--runs 10] [--no-write] [--baseline OTHER_VENV/bin/python]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from bench.common import ROOT, machine_note, median, write_section

HEAVY = (
    "openai",
    "httpx",
    "tenacity",
    "sqlalchemy",
    "sqlmodel",
    "alembic",
    "fastembed",
    "onnxruntime",
    "qdrant_client",
    "qdrant_edge",
    "numpy",
    "tiktoken",
    "pydantic",
)


# -- the instant model server (runs in its own process: `--serve`) -----------------------------------------------


class InstantModel(BaseHTTPRequestHandler):
    """Answers chat completions at once; `GET /stats` returns (and clears) the handler times so far."""

    protocol_version = "HTTP/1.1"  # keep-alive, like a real endpoint behind the SDK's connection pool
    disable_nagle_algorithm = True  # headers and body go out in two writes: without this, 40 ms of delayed ACK
    handled_ms: list[float] = []
    lock = threading.Lock()

    def do_POST(self) -> None:
        """One chat completion: send_message when the request offers tools, a plain reply otherwise."""
        started = time.perf_counter()
        request = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
        names = {(t.get("function") or {}).get("name") for t in request.get("tools") or []}
        if "send_message" in names:
            arguments = json.dumps({"message": "Hello! Nice to meet you."})
            message = {
                "role": "assistant",
                "content": None,
                "tool_calls": [
                    {
                        "id": f"call_{uuid.uuid4().hex[:12]}",
                        "type": "function",
                        "function": {"name": "send_message", "arguments": arguments},
                    }
                ],
            }
            finish = "tool_calls"
        else:
            message, finish = {"role": "assistant", "content": "Hello!"}, "stop"
        self._send(
            {
                "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": request.get("model", "instant"),
                "choices": [{"index": 0, "message": message, "finish_reason": finish}],
                "usage": {"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
            }
        )
        with self.lock:
            self.handled_ms.append((time.perf_counter() - started) * 1000)

    def do_GET(self) -> None:
        """The handler times recorded since the last call."""
        with self.lock:
            times, self.handled_ms[:] = list(self.handled_ms), []
        self._send({"handled_ms": times})

    def _send(self, body: dict) -> None:
        data = json.dumps(body).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        """Quiet: the bench prints its own results."""


def serve() -> None:
    """Serve on a free port, print it, and stop when stdin closes (the bench ended)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), InstantModel)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    print(server.server_address[1], flush=True)
    sys.stdin.read()
    server.shutdown()


# -- the client side ---------------------------------------------------------------------------------------------


@dataclass
class Timings:
    """Wall-clock and CPU seconds (user + system of the process) per run of one command."""

    wall: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)


def timed(argv: list[str], env: dict[str, str], into: Timings | None = None) -> float:
    """Run one process to its exit (it must succeed); note its wall and CPU seconds; return the wall seconds."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}")
    if into is not None:
        into.wall.append(elapsed)
        into.cpu.append(after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime)
    return elapsed


def server_ms(port: int) -> list[float]:
    """The server's handler times since the last call."""
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{port}/stats") as response:
        return json.load(response)["handled_ms"]


def client_ms(trace: Path) -> list[float]:
    """Each model round trip as the client saw it, from the trace's `model_response` events."""
    events = (json.loads(line) for line in trace.read_text().splitlines() if line.strip())
    return [e["latency_ms"] for e in events if e.get("type") == "model_response" and "latency_ms" in e]


def heavy_modules(python: str, env: dict[str, str]) -> list[str]:
    """Which heavy top-level modules `pagemind --help` imports (should be none)."""
    code = (
        "import contextlib, io, sys\nfrom pagemind.runtime.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n    try:\n        main(['--help'])\n"
        "    except SystemExit:\n        pass\n"
        "print(' '.join(sorted({m.split('.')[0] for m in sys.modules} & set(sys.argv[1:]))))"
    )
    done = subprocess.run([python, "-c", code, *HEAVY], env=env, cwd=ROOT, capture_output=True, text=True, check=True)
    return done.stdout.split()


# Where a run's own time goes: what it imports and loads, in the order a run pays for it. Each step is timed as a
# fresh interpreter doing everything up to and including it; its cost is the difference from the step before (CPU).
STEPS: list[tuple[str, str]] = [
    ("SQLAlchemy + sqlmodel", "import sqlalchemy, sqlmodel"),
    ("the state store beyond SQL (its tables; pydantic, yaml, spec, tools)", "import pagemind.runtime.state.store"),
    ("the memory services (archival, recall, embeddings, stores; numpy)", "import pagemind.runtime.memory.wiring"),
    (
        "the rest of the kernel (agent, loop, window, compiler, monitor; httpx, tenacity)",
        "import pagemind.runtime.agent",
    ),
    ("the trace recorder", "import pagemind.runtime.trace.recorder"),
    ("openai (the model SDK)", "import openai"),
    (
        "building the SDK client (httpx pool, TLS context)",
        "openai.AsyncOpenAI(api_key='x', base_url='http://127.0.0.1:9/v1')",
    ),
    ("tiktoken: loading o200k_base", "from pagemind.runtime.tokens import encoding; encoding()"),
]


def step_costs(python: str, env: dict[str, str], runs: int) -> list[tuple[str, float]]:
    """Median CPU seconds each step adds to the ones before it (interleaved, `runs` times each)."""
    # Frozen at the end as the CLI does, so the interpreter's last collection does not count a bigger heap twice.
    programs = ["import gc; gc.freeze()"] + [
        "; ".join([*(code for _, code in STEPS[: i + 1]), "import gc", "gc.freeze()"]) for i in range(len(STEPS))
    ]
    cpu = [Timings() for _ in programs]
    for _ in range(runs):
        for program, into in zip(programs, cpu, strict=True):
            timed([python, "-c", program], env, into)
    cumulative = [median(t.cpu) for t in cpu]
    return [(name, cumulative[i + 1] - cumulative[i]) for i, (name, _) in enumerate(STEPS)]


@dataclass
class Installation:
    """One `pagemind` installation under test (the console script next to `python`) and what was measured."""

    python: str
    home: Path
    help: Timings = field(default_factory=Timings)
    agents: Timings = field(default_factory=Timings)
    run: Timings = field(default_factory=Timings)
    model: list[float] = field(default_factory=list)  # the client's round trips per run, seconds
    handled: list[float] = field(default_factory=list)  # the server's handler time per run, seconds
    first: float = 0.0
    heavy: list[str] = field(default_factory=list)
    parts: list[tuple[str, float]] = field(default_factory=list)

    @property
    def own(self) -> list[float]:
        """Run wall time minus the model's round trip."""
        return [total - model for total, model in zip(self.run.wall, self.model, strict=True)]

    def env(self, port: int) -> dict[str, str]:
        """The environment of its commands: its own PAGEMIND_HOME, the instant server as the model endpoint."""
        env = {
            **os.environ,
            "PAGEMIND_HOME": str(self.home),
            "OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1",
            "OPENAI_API_KEY": "bench",
            "PAGEMIND_LOG_LEVEL": "WARNING",
        }
        return {k: v for k, v in env.items() if k not in ("DATABASE_URL", "QDRANT_URL")}

    def command(self, *args: str) -> list[str]:
        """The command line of `pagemind ARGS` for this installation."""
        return [str(Path(self.python).with_name("pagemind")), *args]


RUN = ("run", "agents/companion.yaml", "-m", "hi")


def run_bench(runs: int, pythons: list[str]) -> tuple[list[Installation], Timings]:
    """Measure each installation, interleaved run by run, with a bare interpreter start before each round."""
    server = subprocess.Popen(
        [sys.executable, "-m", "bench.cli_startup", "--serve"],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        port = int(server.stdout.readline())
        with tempfile.TemporaryDirectory() as scratch:
            tested = [Installation(p, Path(scratch) / f"home{i}") for i, p in enumerate(pythons)]
            for t in tested:
                t.first = timed(t.command(*RUN, "--trace", str(t.home / "first.jsonl")), t.env(port))  # creates the db
            server_ms(port)
            bare = Timings()
            for i in range(runs):
                for t in tested:
                    env = t.env(port)
                    timed([sys.executable, "-c", "pass"], env, bare)
                    timed(t.command("--help"), env, t.help)
                    timed(t.command("agents"), env, t.agents)
                    trace = t.home / f"run-{i}.jsonl"
                    timed(t.command(*RUN, "--trace", str(trace)), env, t.run)
                    t.model.append(sum(client_ms(trace)) / 1000)
                    t.handled.append(sum(server_ms(port)) / 1000)
            for t in tested:
                t.heavy = heavy_modules(t.python, t.env(port))
            tested[-1].parts = step_costs(tested[-1].python, tested[-1].env(port), runs)
            return tested, bare
    finally:
        server.stdin.close()
        server.wait(timeout=10)


def report(tested: list[Installation], bare: Timings, labels: list[str], runs: int, note: str, load_end: float) -> str:
    """The RESULTS.md block."""
    base = median(bare.wall)

    def cells(wall: list[float], cpu: list[float] | None) -> str:
        cpu_text = f"{median(cpu):.3f}" if cpu else "–"
        return f" {median(wall):.3f} | {median(wall) / base:.1f}× | {cpu_text} |"

    rows = [
        ("`python -c pass` (bare interpreter)", lambda t: cells(bare.wall, bare.cpu), ""),
        ("`pagemind --help`", lambda t: cells(t.help.wall, t.help.cpu), "≤ 0.3 s"),
        ("`pagemind agents`", lambda t: cells(t.agents.wall, t.agents.cpu), ""),
        (
            "`pagemind run agents/companion.yaml -m hi` (one turn): total",
            lambda t: cells(t.run.wall, t.run.cpu),
            "",
        ),
        ("… the model: its round trip as the client saw it¹", lambda t: cells(t.model, None), ""),
        ("… own time: total − model", lambda t: cells(t.own, None), "≤ 0.8 s"),
        (
            "… own time, the client's request path included: total − server handler time",
            lambda t: cells([w - h for w, h in zip(t.run.wall, t.handled, strict=True)], None),
            "",
        ),
    ]
    head = " | ".join(f"{label}: wall s | ×python | CPU s" for label in labels)
    lines = [f"| command | {head} | target |", "| --- |" + " --- | --- | --- |" * len(labels) + " --- |"]
    lines += [f"| {name} |{''.join(cell(t) for t in tested)} {target} |" for name, cell, target in rows]
    notes = [
        "¹ Timed around the SDK call (the `latency_ms` of the trace's `model_response` events), so whatever the "
        "client does on its first request counts as the model's: the first import of anyio (which parses its "
        "own source, about 0.1 s), connecting, and for an SDK that imports its resource modules on first use "
        "(`client.chat`), that import. A warm client's round trip to this server takes a few milliseconds.",
        "",
    ]
    notes += [
        f"- {label}: the server spent {median(t.handled) * 1000:.1f} ms (median) in its handler per run; the "
        f"first run, which created the database, took {t.first:.2f} s; heavy modules loaded by `pagemind --help`: "
        f"{', '.join(t.heavy) or 'none'}."
        for label, t in zip(labels, tested, strict=True)
    ]
    t = tested[-1]
    parts = [f"| {name} | {seconds:.3f} |" for name, seconds in t.parts]
    rest = median(t.run.cpu) - median(bare.cpu) - sum(seconds for _, seconds in t.parts)
    notes += [
        "",
        f"Where {labels[-1]}'s run spends its CPU, in the order it pays: each row is a fresh interpreter "
        f"doing everything up to that row, less the row before (medians of {runs}; a difference of two medians "
        "on a busy machine, so a few hundredths either way).",
        "",
        "| step | CPU s |",
        "| --- | --- |",
        *parts,
        f"| everything else: the CLI, settings and logging, SQLite, loading the agent, compiling, the step, the "
        f"trace, exit | {rest:.3f} |",
    ]
    table, notes_text = "\n".join(lines), "\n".join(notes)
    return f"""{note}, {load_end:.2f} at the end (other workers' jobs share these cores: hence the ratio to a bare
`python -c pass` started in the same rounds, and the CPU seconds of each process, in which waiting for a core does not
count); medians of {runs} runs of each command, interleaved, each a fresh process of the installed console
script; SQLite under a temporary PAGEMIND_HOME (created by one run before timing); the model is a local
OpenAI-compatible server in another process that answers at once (HTTP/1.1 keep-alive, a scripted `send_message`
tool call).

{table}

{notes_text}
"""


def label(name: str, python: str) -> str:
    """`name`, with the commit of the checkout whose virtual environment holds `python` (TREE/.venv/bin/python)."""
    tree = Path(python).parent.parent.parent
    done = subprocess.run(["git", "-C", str(tree), "rev-parse", "--short", "HEAD"], capture_output=True, text=True)
    return f"{name} ({done.stdout.strip()})" if done.returncode == 0 else name


def main() -> None:
    """Run the benchmark and write its block of bench/RESULTS.md."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--no-write", action="store_true", help="print the section instead of writing it")
    parser.add_argument(
        "--baseline",
        metavar="PYTHON",
        help="also time the installation of this interpreter (e.g. "
        "a checkout of the previous commit), interleaved, as a second column",
    )
    parser.add_argument("--serve", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        return serve()
    note = machine_note()
    pythons, labels = [sys.executable], [label("this tree", sys.executable)]
    if args.baseline:
        pythons, labels = [args.baseline, sys.executable], [label("baseline", args.baseline), labels[0]]
    tested, bare = run_bench(args.runs, pythons)
    section = report(tested, bare, labels, args.runs, note, os.getloadavg()[0])
    print(section)
    if not args.no_write:
        write_section("cli_startup", "CLI start-up", section)


if __name__ == "__main__":
    main()
