"""bench.letta_side_by_side: whose CPU a server's row gets, how a window's figures are formed, and the fake model's
request count (the servers themselves run only in the bench)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from http.server import ThreadingHTTPServer

import httpx

from bench.letta_side_by_side import Block, Figures, Server, tree_ticks
from bench.turn_cost import FakeModel


def own_ticks(pid: int) -> int:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def test_a_process_tree_counts_its_live_children():
    # A child that burns CPU and then waits: its ticks are the tree's, not yet reaped into ours.
    burn = "import sys\nx = 0\nfor i in range(3_000_000): x += i\nprint('done', flush=True)\nsys.stdin.read()"
    child = subprocess.Popen([sys.executable, "-c", burn], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "done"
        burnt = own_ticks(child.pid)
        assert burnt > 0
        mine = own_ticks(os.getpid())  # read first: our own ticks only grow
        assert tree_ticks(os.getpid()) >= mine + burnt
    finally:
        child.communicate("")
    assert tree_ticks(None) == 0


def test_a_block_gets_the_cpu_and_the_model_requests_from_its_first_send_to_its_last_reply():
    asked = iter([0, 3, 3, 4])
    sent: list[str] = []
    server = Server("s", sent.append, os.getpid(), None, lambda: next(asked))
    server.block(0, ["one", "two"])
    server.block(2, ["three"])
    assert sent == ["one", "two", "three"]
    assert [(b.first, len(b.walls), b.requests) for b in server.blocks] == [(0, 2, 3), (2, 1, 1)]
    assert all(b.cpu_ms >= 0 and b.pg_ms == 0 for b in server.blocks)


def test_a_windows_figures_divide_cpu_by_model_requests_and_by_messages():
    blocks = [Block(0, [10.0, 20.0], 80.0, 4.0, 4), Block(2, [30.0], 40.0, 2.0, 2)]
    figures = Figures.of(blocks)
    assert figures.cpu_per_request == 120.0 / 6
    assert figures.cpu_per_message == 40.0
    assert figures.pg_per_message == 2.0
    assert figures.requests_per_message == 2.0
    assert figures.wall_p50 == 20.0


def test_the_fake_model_counts_the_requests_it_answers():
    server = ThreadingHTTPServer(("127.0.0.1", 0), FakeModel)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{server.server_address[1]}"
    try:
        before = int(httpx.get(f"{url}/requests").text)
        body = {"messages": [{"role": "user", "content": "hi"}], "tools": []}
        for _ in range(2):
            assert httpx.post(f"{url}/v1/chat/completions", content=json.dumps(body)).status_code == 200
        assert int(httpx.get(f"{url}/requests").text) == before + 2
        assert httpx.get(f"{url}/other").status_code == 404
    finally:
        server.shutdown()
        server.server_close()
