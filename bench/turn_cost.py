"""What a realistic turn costs the daemon, part by part (issue 37, item 5).

Three processes: an instant OpenAI-compatible fake model (this module with `--fake`: it answers a step request
with `send_message` at once, a summary request with a line, an extraction request with an empty fact list),
`pagemind serve` over the shipped `agents/` folder (SQLite by default, Postgres with `--db postgres`; the shipped
embedder, fastembed's all-MiniLM-L6-v2, real), and this script as the client. One agent made from the `companion`
template (default 16,000-token window) is sent LoCoMo's lines one at a time, sync, over HTTP, as a user would
(`bench.prompt_cache.lines`); the history grows to several hundred messages and the window flushes as it fills.

Around turns ~20, ~200 and the last ones, a window of `--window` messages is profiled by py-spy attached to the
daemon (sampling from outside, `--nonblocking`: it never stops the daemon, so the daemon's own CPU is what it
would be unprofiled). Every sample of a busy thread is put in one part by the first rule that matches any frame
of its stack, in this order:

- embedding: fastembed, onnxruntime, tokenizers, `runtime/memory/embedding/`;
- token counting: tiktoken, `runtime/tokens.py`;
- SQL: SQLAlchemy, sqlite3, psycopg, `runtime/state/` (the store's code);
- request and response JSON: the model request's body and the response's parse (`runtime/model/request.py`,
  `response.py`, the window's wire cache), the json module under the model client;
- prefetch and search: `runtime/memory/` (retrieval, recall, archival, vectors), qdrant;
- compiling: `runtime/compiler.py`, `budget.py`, `pressure/`, `window.py`;
- model HTTP: the model call's client (aiohttp, httpx, `runtime/model/`);
- HTTP (API side): uvicorn, starlette, FastAPI, h11, httptools, `scheduler/api/`;
- event loop: samples with no Python frame below `asyncio.Runner.run` (uvloop's C code: socket reads and writes,
  with the kernel's loopback work they cause, timers, dispatching callbacks);
- the rest: the daemon's queue and turn, the loop, the thread hand-offs, logging.

A pool thread sampled in its wait for work is left out (py-spy counts a runnable thread as busy, and on a loaded
host a woken thread waits for a core).

Each part's share of the samples times the daemon's CPU over the window (process CPU time from /proc, all its
threads, divided by the messages) is its CPU per message. Wall per message is the client's, median.

    python -m bench.turn_cost [--turns 600] [--window 60] [--marks 20 200] [--db sqlite postgres] [--no-write]
    python -m bench.turn_cost --ab PAGEMIND_TURN_SHORTCUTS=off  # the same daemon with a switch off, alternating
    python -m bench.turn_cost --before PAGEMIND_TURN_SHORTCUTS=off  # the by-part tables with it off, then on

`--ab NAME=VALUE` runs two daemons side by side (B with NAME=VALUE in its environment), each message sent to both
in alternating order, and reports B's CPU and wall per message over A's, with `uptime` at the start.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from bench.common import ROOT, drop_postgres, machine_note, median, scratch_postgres, table_row, write_section

TICK = os.sysconf("SC_CLK_TCK")
SPY_DIR: Path | None = None  # --keep-samples: where py-spy's raw samples stay
PARTS = (
    "embedding",
    "token counting",
    "SQL",
    "request and response JSON",
    "prefetch and search",
    "compiling",
    "model HTTP",
    "HTTP (API side)",
    "event loop",
    "the rest",
)
# (part, substrings of a frame's "function (file:line)"); the first part any frame of a stack matches wins
# (part, substrings of a frame's "function (file:line)", py-spy naming files from their package's folder); the
# first part any frame of a stack matches wins
RULES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("embedding", ("(fastembed/", "(onnxruntime/", "(tokenizers/", "(runtime/memory/embedding/")),
    ("token counting", ("(tiktoken/", "(runtime/tokens.py")),
    ("SQL", ("(sqlalchemy/", "(sqlite3/", "(psycopg/", "(sqlmodel/", "(runtime/state/")),
    ("request and response JSON", ("(runtime/model/request.py", "(runtime/model/response.py", "WireCache.")),
    ("prefetch and search", ("(runtime/memory/", "(qdrant_edge/", "(qdrant_client/", "Agent.prefetch ")),
    ("compiling", ("(runtime/compiler.py", "(runtime/budget.py", "(runtime/pressure/", "(runtime/window.py")),
    ("model HTTP", ("(aiohttp/", "(httpx/", "(httpcore/", "(openai/", "(runtime/model/")),
    ("HTTP (API side)", ("(uvicorn/", "(starlette/", "(fastapi/", "(h11/", "(httptools/", "(scheduler/api/")),
)


IDLE = ("_worker (concurrent/futures/thread.py:81)",)  # a pool thread waiting for work: runnable, not working


def classify(stack: str) -> str | None:
    """The part a sampled stack (py-spy's raw line, frames joined by ';') belongs to; None for a thread that waits
    (py-spy counts a thread that is runnable, waiting for a core or the GIL on a loaded host, as busy)."""
    leaf = stack.rpartition(";")[2]
    if leaf.startswith(IDLE):
        return None
    for part, needles in RULES:
        if any(needle in stack for needle in needles):
            return part
    if leaf.startswith("Runner.run ("):  # below it only uvloop's C: sockets, timers, the callbacks' dispatch
        return "event loop"
    return "the rest"


# --- the fake model ---------------------------------------------------------------------------------------------


def _completion(message: dict, finish: str) -> bytes:
    return json.dumps(
        {
            "id": "chatcmpl-bench",
            "object": "chat.completion",
            "created": 0,
            "model": "gpt-4o-mini",
            "choices": [{"index": 0, "finish_reason": finish, "message": message}],
            "usage": {"prompt_tokens": 1000, "completion_tokens": 9, "total_tokens": 1009},
        }
    ).encode()


SAID = (  # a companion's reply of a usual length (~45 tokens), so the window fills and flushes as in use
    "That sounds like a lot to carry, and I am glad you told me. How did it feel when it happened, and who was "
    "with you? You mentioned your week was busy; is it getting any calmer now?"
)
REPLY = _completion(
    {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {
                "id": "call_1",
                "type": "function",
                "function": {"name": "send_message", "arguments": json.dumps({"message": SAID})},
            }
        ],
    },
    "tool_calls",
)


def facts(raw: bytes) -> bytes:
    """An extraction's answer: the three longest lines of the prompt as facts, so that archival memory fills as a
    real extraction fills it (and every later turn's prefetch searches it)."""
    transcript = str(json.loads(raw)["messages"][-1].get("content") or "")  # the lines leaving the window
    said = [line.strip()[:200] for line in transcript.splitlines() if "] user:" in line or " user:" in line]
    longest = sorted(set(said), key=len)[-3:]
    found = {"facts": [{"text": line, "importance": 0.5} for line in longest], "preferences": []}
    return _completion({"role": "assistant", "content": json.dumps(found)}, "stop")


SUMMARY = _completion({"role": "assistant", "content": "The user and the companion talked about their week."}, "stop")


class FakeModel(BaseHTTPRequestHandler):
    """The instant model: a `send_message` step, extraction facts or a summary line, whatever it is asked."""

    protocol_version = "HTTP/1.1"  # keep-alive
    disable_nagle_algorithm = True  # headers and body in two writes: no delayed-ACK stall
    answered = 0  # model requests so far (`GET /requests`): a bench's denominator "per model request"

    def do_GET(self) -> None:
        body = str(FakeModel.answered).encode()
        self.send_response(200 if self.path == "/requests" else 404)
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("content-length", 0)))
        FakeModel.answered += 1  # ThreadingHTTPServer, but the daemon sends one request at a time here
        if b'"tools"' in raw:
            answer = REPLY  # a step: the reply at once (one step per turn, as the Letta comparison's fake)
        elif b"json" in raw.lower():
            answer = facts(raw)
        else:
            answer = SUMMARY
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(answer)))
        self.end_headers()
        self.wfile.write(answer)

    def log_message(self, *args: object) -> None:
        pass


def fake() -> None:
    """The fake model's process: print the port, answer until killed."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeModel)
    print(server.server_address[1], flush=True)
    server.serve_forever()


# --- the daemon ---------------------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cpu_ticks(pid: int) -> int:
    """utime + stime of the process (all its threads), in clock ticks."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


@dataclass
class Daemon:
    """A `pagemind serve` process and its scratch state."""

    process: subprocess.Popen
    url: str
    database: str
    scratch: bool  # a Postgres database made for this run (dropped at the end)

    @classmethod
    def start(cls, db: str, model_url: str, home: Path, extra: dict[str, str]) -> Daemon:
        database, drop = (
            (f"sqlite:///{home / 'pagemind.db'}", None) if db == "sqlite" else (scratch_postgres("turncost"), True)
        )
        env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "QDRANT_", "PAGEMIND_"))}
        env.update(
            PAGEMIND_HOME=str(home),
            DATABASE_URL=database,
            OPENAI_BASE_URL=model_url,
            OPENAI_API_KEY="bench",
            PAGEMIND_LOG_LEVEL="error",
            **extra,
        )
        port = free_port()
        process = subprocess.Popen(
            [sys.executable, "-m", "pagemind.scheduler.cli", "serve", str(ROOT / "agents"), "--port", str(port)],
            cwd=home,
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        daemon = cls(process, f"http://127.0.0.1:{port}", database, bool(drop))
        daemon.wait_healthy()
        return daemon

    def wait_healthy(self, deadline_s: float = 180) -> None:
        import httpx

        end = time.monotonic() + deadline_s
        while time.monotonic() < end:
            if self.process.poll() is not None:
                raise RuntimeError(f"serve exited {self.process.returncode}")
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"{self.url}/health", timeout=1).status_code == 200:
                    return
            time.sleep(0.2)
        raise RuntimeError("serve did not become healthy")

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(60)
        except subprocess.TimeoutExpired:
            self.process.kill()
        if self.scratch:
            drop_postgres(self.database)


class Profiler:
    """py-spy attached to a process for a while, its samples by part."""

    def __init__(self, pid: int, rate: int, out: Path) -> None:
        spy = Path(sys.executable).parent / "py-spy"
        self.out = out
        self.process = subprocess.Popen(
            [str(spy), "record", "--pid", str(pid), "--rate", str(rate), "--format", "raw", "--nonblocking"]
            + ["-o", str(out)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(1.0)  # attached and sampling

    def parts(self) -> Counter[str]:
        self.process.send_signal(signal.SIGINT)
        self.process.wait(60)
        counts: Counter[str] = Counter()
        for line in self.out.read_text().splitlines():
            stack, _, count = line.rpartition(" ")
            part = classify(stack) if stack and count.isdigit() else None
            if part is not None:
                counts[part] += int(count)
        return counts


@dataclass
class Window:
    """One profiled window of messages."""

    first: int
    messages: int
    cpu_ms: float  # daemon CPU per message
    walls: list[float]
    samples: Counter[str] = field(default_factory=Counter)
    history: tuple[int, int] = (0, 0)  # stored messages and those in the window, at the window's end

    def split(self) -> dict[str, float]:
        total = sum(self.samples.values()) or 1
        return {part: self.cpu_ms * self.samples[part] / total for part in PARTS}


def send(client, text: str) -> float:
    started = time.perf_counter()
    response = client.post("/v1/agents/bench/messages", json={"content": text, "timeout_s": 120})
    wall = (time.perf_counter() - started) * 1000
    if response.status_code != 200 or response.json().get("state") != "done":
        raise RuntimeError(f"HTTP {response.status_code}: {response.text[:300]}")
    return wall


def history(database: str) -> tuple[int, int]:
    """The agent's stored messages and those in its window, read from the daemon's database."""
    import sqlalchemy

    engine = sqlalchemy.create_engine(database)
    try:
        with engine.connect() as conn:
            row = conn.execute(
                sqlalchemy.text("SELECT count(*), sum(CASE WHEN in_context THEN 1 ELSE 0 END) FROM messages")
            ).one()
    finally:
        engine.dispose()
    return int(row[0]), int(row[1] or 0)


def run(
    db: str, turns: int, window: int, marks: list[int], rate: int, model_url: str, home: Path, env: dict[str, str]
) -> dict:
    """One daemon, one conversation; the profiled windows and the whole run's figures."""
    import httpx

    from bench.prompt_cache import lines

    texts = lines(turns)
    daemon = Daemon.start(db, model_url, home, env)
    starts = sorted({min(max(0, m), turns - window) for m in [*marks, turns - window]})
    windows: list[Window] = []
    walls: list[float] = []
    try:
        with httpx.Client(base_url=daemon.url, timeout=300) as client:
            client.post("/v1/agents", json={"template": "companion", "name": "bench"}).raise_for_status()
            pid = daemon.process.pid
            cpu_start, i = cpu_ticks(pid), 0
            while i < turns:
                if i in starts:
                    profiler = Profiler(pid, rate, (SPY_DIR or home) / f"spy-{db}-{i}.txt")
                    before, own = cpu_ticks(pid), []
                    for k in range(i, i + window):
                        own.append(send(client, texts[k]))
                    cpu = (cpu_ticks(pid) - before) * 1000 / TICK / window
                    windows.append(Window(i, window, cpu, own, profiler.parts(), history(daemon.database)))
                    i += window
                    continue
                walls.append(send(client, texts[i]))
                i += 1
            total_cpu = (cpu_ticks(pid) - cpu_start) * 1000 / TICK / turns
    finally:
        daemon.stop()
    # the wall of the messages py-spy did not watch (it takes a share of the two cores while it samples)
    return {"db": db, "windows": windows, "cpu": total_cpu, "wall": median(walls[20:]), "turns": turns}


def ab(db: str, turns: int, setting: str, model_url: str, home: Path) -> dict:
    """Two daemons, A as shipped and B with `setting` in its environment, the same conversation sent to both in
    alternating order; per-message CPU (each process's CPU from the end of 20 warm-up turns to the end, ÷ the
    messages: background work counts) and median wall of each."""
    import httpx

    from bench.common import alternating
    from bench.prompt_cache import lines

    name, _, value = setting.partition("=")
    texts = lines(turns)
    daemons = {
        "A": Daemon.start(db, model_url, home / "a", {}),
        "B": Daemon.start(db, model_url, home / "b", {name: value}),
    }
    start: dict[str, int] = {}
    cpu: dict[str, int] = {}
    walls: dict[str, list[float]] = {k: [] for k in daemons}
    try:
        clients = {k: httpx.Client(base_url=d.url, timeout=300) for k, d in daemons.items()}
        for c in clients.values():
            c.post("/v1/agents", json={"template": "companion", "name": "bench"}).raise_for_status()
        for i, text in enumerate(texts):
            if i == 20:
                start = {k: cpu_ticks(d.process.pid) for k, d in daemons.items()}
            for k in alternating(["A", "B"], i):
                wall = send(clients[k], text)
                if i >= 20:
                    walls[k].append(wall)
        time.sleep(2)  # work a reply left running in the background (a flush's preparation) ends
        # The whole process's CPU from the end of the warm-up: background work counts wherever it ran.
        cpu = {k: cpu_ticks(d.process.pid) - start[k] for k, d in daemons.items()}
    finally:
        for d in daemons.values():
            d.stop()
    n = turns - 20
    result = {k: {"cpu": cpu[k] * 1000 / TICK / n, "wall": median(walls[k])} for k in daemons}
    return {"setting": setting, "db": db, "turns": turns, **result}


def ab_line(r: dict) -> str:
    """One A/B result as a line: B's CPU and wall per message over A's."""
    a, b = r["A"], r["B"]
    return (
        f"{r['db']}, {r['turns']} turns, B = {r['setting']}: CPU/message A {a['cpu']:.2f} ms, B {b['cpu']:.2f} ms, "
        f"B/A {b['cpu'] / a['cpu']:.3f}; wall p50 A {a['wall']:.1f} ms, B {b['wall']:.1f} ms, "
        f"B/A {b['wall'] / a['wall']:.3f}"
    )


def report(results: list[dict], window: int, load: str) -> str:
    head = table_row("db", "turns (history)", *PARTS, "CPU / message", "wall p50 (ms)")
    rows = []
    for result in results:
        for w in result["windows"]:
            split = w.split()
            rows.append(
                table_row(
                    result["db"],
                    f"{w.first}–{w.first + w.messages} ({w.history[0]} / {w.history[1]})",
                    *(f"{split[p]:.2f}" for p in PARTS),
                    f"**{w.cpu_ms:.2f}**",
                    f"{median(w.walls):.1f}",
                )
            )
        rows.append(
            table_row(
                result["db"],
                f"all {result['turns']}",
                *("" for _ in PARTS),
                f"**{result['cpu']:.2f}**",
                f"{result['wall']:.1f}",
            )
        )
    return f"""
{machine_note()} (`uptime`: {load}). The shipped companion template (16,000-token window), sent LoCoMo lines one at
a time over HTTP (sync), `pagemind serve` with the shipped embedder (fastembed all-MiniLM-L6-v2), an instant fake
model (one `send_message` step per turn). Daemon CPU per message in ms, split by py-spy's samples of its busy threads
(parts are exclusive, in the module's order: a SQL call under the prefetch counts as SQL), over windows of
{window} messages; "all" is the whole run's process CPU ÷ messages and the median wall of the unprofiled messages
after 20 warm-up turns (py-spy takes a share of the cores while it samples: the windows' wall is higher than the
daemon's own).
History: the agent's stored messages / those in its window at the window's end.

{head}
| --- | --- |{" ---: |" * (len(PARTS) + 2)}
{chr(10).join(rows)}
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fake", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--turns", type=int, default=600)
    parser.add_argument("--window", type=int, default=60, help="messages per profiled window")
    parser.add_argument("--marks", type=int, nargs="+", default=[20, 200], help="first turn of each window")
    parser.add_argument("--rate", type=int, default=500, help="py-spy samples per second")
    parser.add_argument("--db", nargs="+", choices=["sqlite", "postgres"], default=["sqlite"])
    parser.add_argument("--ab", metavar="NAME=VALUE", help="compare the daemon with this setting against without")
    parser.add_argument(
        "--before", metavar="NAME=VALUE", help="a first conversation with this setting, then one without: two tables"
    )
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--keep-samples", type=Path, help="a folder for py-spy's raw samples (default: discarded)")
    args = parser.parse_args()
    global SPY_DIR
    SPY_DIR = args.keep_samples
    if args.fake:
        fake()
        return
    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    model = subprocess.Popen(
        [sys.executable, "-m", "bench.turn_cost", "--fake"], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    try:
        model_url = f"http://127.0.0.1:{model.stdout.readline().strip()}/v1"
        with tempfile.TemporaryDirectory(prefix="turncost-") as tmp:
            if args.ab:
                for db in args.db:
                    (Path(tmp) / db / "a").mkdir(parents=True)
                    (Path(tmp) / db / "b").mkdir(parents=True)
                    r = ab(db, args.turns, args.ab, model_url, Path(tmp) / db)
                    print(f"{load}\n{ab_line(r)}", flush=True)
                return
            runs: dict[str, list[dict]] = {"before": [], "after": []} if args.before else {"": []}
            for label, results in runs.items():
                name, _, value = (args.before or "").partition("=") if label == "before" else ("", "", "")
                for db in args.db:
                    home = Path(tmp) / f"{db}{label}"
                    home.mkdir()
                    env = {name: value} if name else {}
                    results.append(run(db, args.turns, args.window, args.marks, args.rate, model_url, home, env))
    finally:
        model.kill()
    body = "\n".join(
        (f"**{label}** ({args.before if label == 'before' else 'as shipped'}):\n" if label else "")
        + report(results, args.window, load)
        for label, results in runs.items()
    )
    print(body)
    if not args.no_write:
        write_section("turn_cost", "A realistic turn's cost, by part (the daemon, over HTTP)", body)


if __name__ == "__main__":
    main()
