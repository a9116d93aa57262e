"""pagemind's daemon beside Letta 0.16.8, one long realistic conversation sent to both (issue 37, item 5).

The same LoCoMo lines (`bench.prompt_cache.lines`) go to both servers one message at a time over HTTP, in blocks of
`--block` messages, first to one server and then to the other, which goes first alternating (A B, B A, …) so that a
drift in the host's load falls on both alike. pagemind: `pagemind serve` over the shipped `agents/`, an agent made
from the `companion` template (default window, the shipped embedder), the instant fake model of `bench.turn_cost` (a
`send_message` step, a summary line, extraction facts, so archival memory fills and later turns prefetch from it).
Letta: a server already running, set up as in `../shared/letta-baseline/README.md` (its pooled setting, its own
Postgres, that folder's `fake_openai.py` as its model, which logs one line per request), an agent made as that
folder's `bench.py` makes it.

For each block and each server: the client's wall time of each message, and from the block's first send to its
last reply the CPU of the server's process tree (its own, its live descendants', what it reaped; background work
in that time counts, and an idle server's own ticking does not pile up while the other server works), the CPU of
a Postgres cluster's process tree when its postmaster's pid is given, and the model requests its fake answered.
A window's "CPU per model request" is its CPU ÷ its model requests; the ratio is Letta's ÷ pagemind's, the
issue's measure. Windows are counted in whole blocks (a block belongs to the window its first turn is in).

    python -m bench.letta_side_by_side --letta-pid PID --letta-fake-log FILE [--letta-pg-pid PID]
        [--letta http://127.0.0.1:8283] [--turns 1000] [--window 60] [--marks 20 300 600] [--block 10]
        [--db sqlite|postgres] [--pg-pid PID] [--no-write]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bench.common import ROOT, alternating, machine_note, median, table_row, write_section
from bench.turn_cost import TICK, Daemon

LETTA_AGENT = {  # as ../shared/letta-baseline/bench.py makes it
    "model": "openai-proxy/gpt-4o-mini",
    "embedding": "openai/text-embedding-3-small",
    "memory_blocks": [
        {"label": "human", "value": "The human is a benchmark script."},
        {"label": "persona", "value": "I am a helpful test agent."},
    ],
}


def tree_ticks(root: int | None) -> int:
    """utime + stime of `root` and its live descendants, and of the children each of them reaped, in clock ticks
    (0 for no pid)."""
    total, todo = 0, [] if root is None else [root]
    while todo:
        pid = todo.pop()
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
            threads = list(Path(f"/proc/{pid}/task").iterdir())
            children = [int(c) for t in threads for c in (t / "children").read_text().split()]
        except OSError:
            continue  # it ended meanwhile: what it used is in its parent's reaped ticks
        total += sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
        todo.extend(children)
    return total


@dataclass
class Block:
    """Consecutive messages sent to one server: their walls, and the CPU and model requests from the first send
    to the last reply."""

    first: int
    walls: list[float]
    cpu_ms: float
    pg_ms: float
    requests: int


@dataclass
class Server:
    """One side: how to send it a message, whose CPU to read, how many model requests its fake answered."""

    name: str
    send: Callable[[str], None]
    pid: int
    pg_pid: int | None
    requests: Callable[[], int]
    blocks: list[Block] = field(default_factory=list)

    def block(self, first: int, texts: list[str]) -> None:
        """Send `texts` one after another (turns `first`…), measured as one block."""
        before = (tree_ticks(self.pid), tree_ticks(self.pg_pid), self.requests())
        walls = []
        for text in texts:
            started = time.perf_counter()
            self.send(text)
            walls.append((time.perf_counter() - started) * 1000)
        cpu, pg, asked = (
            b - a for a, b in zip(before, (tree_ticks(self.pid), tree_ticks(self.pg_pid), self.requests()), strict=True)
        )
        self.blocks.append(Block(first, walls, cpu * 1000 / TICK, pg * 1000 / TICK, asked))


def pagemind_side(client: httpx.Client, daemon: Daemon, fake_url: str, pg_pid: int | None) -> Server:
    client.post("/v1/agents", json={"template": "companion", "name": "bench"}).raise_for_status()

    def send(text: str) -> None:
        r = client.post("/v1/agents/bench/messages", json={"content": text, "timeout_s": 300})
        if r.status_code != 200 or r.json().get("state") != "done":
            raise RuntimeError(f"pagemind: HTTP {r.status_code}: {r.text[:300]}")

    return Server("pagemind", send, daemon.process.pid, pg_pid, lambda: int(httpx.get(f"{fake_url}/requests").text))


def letta_side(client: httpx.Client, pid: int, pg_pid: int | None, fake_log: Path) -> Server:
    agent = client.post("/v1/agents/", json={"name": f"side-by-side-{os.getpid()}", **LETTA_AGENT})
    agent.raise_for_status()
    agent_id = agent.json()["id"]

    def send(text: str) -> None:
        r = client.post(f"/v1/agents/{agent_id}/messages", json={"messages": [{"role": "user", "content": text}]})
        if r.status_code >= 300:
            raise RuntimeError(f"Letta: HTTP {r.status_code}: {r.text[:300]}")

    def requests() -> int:
        with fake_log.open("rb") as f:
            return sum(1 for _ in f)

    return Server("Letta", send, pid, pg_pid, requests)


@dataclass
class Figures:
    """One server over one window of messages."""

    cpu_per_request: float
    cpu_per_message: float
    pg_per_message: float
    requests_per_message: float
    wall_p50: float

    @classmethod
    def of(cls, blocks: list[Block]) -> Figures:
        cpu, pg, asked = (sum(b.cpu_ms for b in blocks), sum(b.pg_ms for b in blocks), sum(b.requests for b in blocks))
        walls = [w for b in blocks for w in b.walls]
        return cls(cpu / max(asked, 1), cpu / len(walls), pg / len(walls), asked / len(walls), median(walls))


def converse(servers: list[Server], texts: list[str], size: int) -> None:
    """The conversation in blocks of `size` messages, each block sent to one server and then to the other, which
    goes first alternating."""
    for round_index, first in enumerate(range(0, len(texts), size)):
        for server in alternating(servers, round_index):
            server.block(first, texts[first : first + size])
        if round_index % 10 == 0:
            print(f"turn {first}", flush=True)


def report(servers: list[Server], spans: list[tuple[int, int]], db: str, load: str, block: int) -> str:
    letta, pagemind = servers
    head = table_row(
        "turns",
        "Letta CPU / request (ms)",
        "pagemind CPU / request (ms)",
        "**CPU ratio**",
        "Letta wall p50 (ms)",
        "pagemind wall p50 (ms)",
        "**wall ratio**",
        "requests / message (Letta, pagemind)",
        "Postgres CPU / message (Letta, pagemind)",
    )
    rows = []
    for first, end in spans:
        a, b = (Figures.of([x for x in s.blocks if first <= x.first < end]) for s in (letta, pagemind))
        rows.append(
            table_row(
                f"{first}–{end}",
                f"{a.cpu_per_request:.1f}",
                f"{b.cpu_per_request:.2f}",
                f"**{a.cpu_per_request / b.cpu_per_request:.0f}×**",
                f"{a.wall_p50:.0f}",
                f"{b.wall_p50:.1f}",
                f"**{a.wall_p50 / b.wall_p50:.0f}×**",
                f"{a.requests_per_message:.2f}, {b.requests_per_message:.2f}",
                f"{a.pg_per_message:.1f}, {b.pg_per_message:.1f}",
            )
        )
    return f"""
{machine_note()} (`uptime` at the start: {load}). The same LoCoMo lines sent one at a time over HTTP to Letta
0.16.8 (pooled, its own Postgres, `letta_v1_agent`, 128k window, its fake model from `../shared/letta-baseline/`)
and to `pagemind serve` ({db}, the companion template at its default window, the shipped embedder, the fake model
of `bench.turn_cost`, whose extraction files facts so that later turns prefetch from archival memory), alternating
which goes first, in blocks of {block} messages. Server CPU: the process tree's over each block (from its first send
to its last reply), divided by the model requests its fake answered in the window; wall: the client's, median.

{head}
| --- |{" ---: |" * 8}
{chr(10).join(rows)}
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--letta", default="http://127.0.0.1:8283")
    parser.add_argument("--letta-pid", type=int, required=True, help="Letta's server process (the tree is counted)")
    parser.add_argument("--letta-fake-log", type=Path, required=True, help="the log its fake model writes")
    parser.add_argument("--letta-pg-pid", type=int, help="the postmaster of Letta's Postgres cluster")
    parser.add_argument("--pg-pid", type=int, help="the postmaster of pagemind's Postgres cluster (--db postgres)")
    parser.add_argument("--db", choices=["sqlite", "postgres"], default="sqlite")
    parser.add_argument("--turns", type=int, default=1000)
    parser.add_argument("--window", type=int, default=60)
    parser.add_argument("--marks", type=int, nargs="+", default=[20, 300, 600], help="first turn of each window")
    parser.add_argument("--block", type=int, default=10, help="messages sent to one server before the other")
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    from bench.prompt_cache import lines

    load = subprocess.run(["uptime"], capture_output=True, text=True).stdout.strip()
    texts = lines(args.turns)
    model = subprocess.Popen(
        [sys.executable, "-m", "bench.turn_cost", "--fake"], cwd=ROOT, stdout=subprocess.PIPE, text=True
    )
    assert model.stdout is not None
    fake_url = f"http://127.0.0.1:{model.stdout.readline().strip()}"
    try:
        with tempfile.TemporaryDirectory(prefix="side-by-side-") as home:
            daemon = Daemon.start(args.db, f"{fake_url}/v1", Path(home), {})
            try:
                with (
                    httpx.Client(base_url=daemon.url, timeout=300) as ours,
                    httpx.Client(base_url=args.letta, timeout=600) as theirs,
                ):
                    servers = [
                        letta_side(theirs, args.letta_pid, args.letta_pg_pid, args.letta_fake_log),
                        pagemind_side(ours, daemon, fake_url, args.pg_pid if args.db == "postgres" else None),
                    ]
                    converse(servers, texts, args.block)
            finally:
                daemon.stop()
    finally:
        model.kill()
    last = max(0, args.turns - args.window)
    windows = sorted({(m, min(m + args.window, args.turns)) for m in [*args.marks, last] if 0 <= m < args.turns})
    body = report(servers, [*windows, (20, args.turns)], args.db, load, args.block)
    print(body, flush=True)
    if not args.no_write:
        title = f"pagemind beside Letta 0.16.8, one long conversation ({args.db})"
        write_section(f"letta_side_by_side.{args.db}", title, body)


if __name__ == "__main__":
    main()
