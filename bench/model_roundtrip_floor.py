"""What a model call over HTTP costs beside the model's own time, with no agent runtime at all: a bare client posts
a chat completion of the daemon's size to the stub model of bench.daemon_throughput (tests/support/openai_stub.py,
another process), one call at a time as a lone user's turn makes them, and the client's wall time per call is set
against the stub's own time per completion (`GET /stats`: from the request read to the answer written).

The difference is the HTTP round trip on loopback, the stub's own parsing and the two processes waking up: the
part of bench.daemon_throughput's "own overhead" at low load that any client pays. The daemon's own model call
(`runtime/model_post.AiohttpPost`) is the same aiohttp POST, so what the daemon measures above this floor is its
own. Both of the runtime's HTTP clients are measured, alternating.

    python -m bench.model_roundtrip_floor [--calls 200] [--latency-ms 50] [--no-write]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import subprocess
import sys
import time

import aiohttp
import httpx

from bench.common import ROOT, machine_note, write_section

# The size of a daemon step's request in bench.daemon_throughput (system prompt, blocks, a few messages, tools).
BODY = json.dumps(
    {
        "model": "gpt-4o-mini",
        "temperature": 0.7,
        "max_tokens": 256,
        "messages": [
            {"role": "system", "content": "x" * 6000},
            {"role": "user", "content": "message 3 from user-00001"},
        ],
        "tools": [
            {
                "type": "function",
                "function": {"name": f"tool_{i}", "description": "d" * 200, "parameters": {"type": "object"}},
            }
            for i in range(8)
        ],
    }
).encode()


async def stats(client: httpx.AsyncClient, base: str) -> tuple[int, float]:
    """The stub's completions so far, and the seconds they took there in all."""
    answer = (await client.get(f"{base}/stats")).json()
    return answer["completions"], answer["service_s"]


async def measure(kind: str, base: str, calls: int) -> dict[str, float]:
    """`calls` POSTs one after another on one keep-alive connection: client ms per call, stub ms per call."""
    headers = {"content-type": "application/json", "authorization": "Bearer bench"}
    async with httpx.AsyncClient() as control, aiohttp.ClientSession() as session, httpx.AsyncClient() as plain:
        before = await stats(control, base)
        wall = []
        for _ in range(calls):
            started = time.perf_counter()
            if kind == "aiohttp":
                async with session.post(f"{base}/v1/chat/completions", data=BODY, headers=headers) as response:
                    await response.read()
            else:
                (await plain.post(f"{base}/v1/chat/completions", content=BODY, headers=headers)).read()
            wall.append((time.perf_counter() - started) * 1000)
        after = await stats(control, base)
    stub_ms = 1000 * (after[1] - before[1]) / (after[0] - before[0])
    return {"client_p50": statistics.median(wall), "stub_ms": stub_ms, "floor_p50": statistics.median(wall) - stub_ms}


async def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--no-write", action="store_true", help="print only, leave RESULTS.md")
    args = parser.parse_args()
    note = machine_note()
    stub = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "support" / "openai_stub.py"), "--latency-ms", str(args.latency_ms)],
        stdout=subprocess.PIPE,
        text=True,
    )
    base = f"http://127.0.0.1:{int(stub.stdout.readline().split()[-1])}"
    results: dict[str, list[dict[str, float]]] = {"aiohttp": [], "httpx": []}
    try:
        for _ in range(args.rounds):
            for kind in results:
                results[kind].append(await measure(kind, base, args.calls))
    finally:
        stub.terminate()
    lines = [
        "| client | client ms per call p50 | stub's own ms per call | beside the model's time (ms per call) |",
        "| --- | ---: | ---: | ---: |",
    ]
    for kind, runs in results.items():
        med = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
        lines.append(f"| {kind} | {med['client_p50']:.2f} | {med['stub_ms']:.2f} | {med['floor_p50']:.2f} |")
    body = (
        f"{note}; `python -m bench.model_roundtrip_floor --calls {args.calls} --rounds {args.rounds}`: "
        f"{args.calls} calls one after another per round, {args.rounds} rounds alternating the clients, medians "
        f"over the rounds; the stub's latency {args.latency_ms:.0f} ms.\n\n" + "\n".join(lines) + "\n"
    )
    print(body)
    if not args.no_write:
        write_section("model_roundtrip_floor", "Model call round trip beside the model's time", body)


if __name__ == "__main__":
    asyncio.run(main())
