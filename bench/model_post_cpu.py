"""The model call's HTTP cost: CPU per request of the lean POST (`runtime.model.transports.LeanPost`) against a local
OpenAI-compatible server in another process, at several numbers of calls in flight.

The server is tests/support/openai_stub.py with a fixed latency (20 ms by default), so that calls overlap as a daemon's
do. Each measurement is a fresh process: one `LeanPost` on the endpoint's shared SDK client, every connection
warmed first (two calls per slot), then `--requests` calls with at most N in flight; CPU = the process's
user + system time over the calls. With `--base CHECKOUT` each measurement also runs with that checkout's
interpreter (`CHECKOUT/.venv/bin/python`, whose editable install is that checkout's code), alternating which
goes first, and the ratios are reported.

    python -m bench.model_post_cpu [--base /path/to/main-checkout] [--inflight 1 8 64] [--repeat 4] [--no-write]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import subprocess
import sys
import time
from pathlib import Path

from bench.common import ROOT, alternating, bench_argv, checkout_pythons, machine_note, median, write_section
from bench.daemon_throughput import free_port

BODY = json.dumps({"model": "stub", "messages": [{"role": "user", "content": "hello " * 50}]}).encode()


async def cpu_per_request(url: str, requests: int, inflight: int) -> float:
    """CPU milliseconds per call of one `LeanPost`, with at most `inflight` calls at once."""
    from pagemind.runtime.model.pool import Endpoint, shared_client
    from pagemind.runtime.model.posters import poster_for

    poster = poster_for(shared_client(Endpoint(url, "sk-bench", 60, 10)))
    slots = asyncio.Semaphore(inflight)

    async def call() -> None:
        async with slots:
            (await poster.post(BODY)).raise_for_status()

    await asyncio.gather(*(call() for _ in range(2 * inflight)))  # every connection opened before measuring
    start = time.process_time()
    await asyncio.gather(*(call() for _ in range(requests)))
    return (time.process_time() - start) / requests * 1000


def measure_with(python: str, url: str, requests: int, inflight: int) -> float:
    """`cpu_per_request` in a fresh process of `python` (this module with `--json`)."""
    done = subprocess.run(
        bench_argv(
            python, "model_post_cpu", "--json", "--url", url, "--requests", str(requests), "--inflight", str(inflight)
        ),
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=600,
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base", type=Path, help="another checkout (with its own .venv) to compare with")
    parser.add_argument("--inflight", type=int, nargs="+", default=[1, 8, 64])
    parser.add_argument("--requests", type=int, default=2000, help="calls per measurement")
    parser.add_argument("--repeat", type=int, default=4, help="measurements of each checkout (medians reported)")
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--url", help=argparse.SUPPRESS)
    parser.add_argument("--json", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args()
    if args.json:
        print(json.dumps(asyncio.run(cpu_per_request(args.url, args.requests, args.inflight[0]))))
        return
    note = machine_note()
    checkouts = checkout_pythons(args.base)
    port = free_port()
    stub = subprocess.Popen(
        [
            sys.executable,
            str(ROOT / "tests" / "support" / "openai_stub.py"),
            "--port",
            str(port),
            "--latency-ms",
            str(args.latency_ms),
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        stub.stdout.readline()  # "listening on …": it accepts connections
        url = f"http://127.0.0.1:{port}/v1"
        rows = [
            "| calls in flight | "
            + " | ".join(f"{name}: CPU ms per call (median)" for name in checkouts)
            + (" | this / base |" if args.base else " |"),
            "| ---: |" + " ---: |" * (len(checkouts) + (1 if args.base else 0)),
        ]
        for inflight in args.inflight:
            runs: dict[str, list[float]] = {name: [] for name in checkouts}
            for i in range(args.repeat):
                for name in alternating(list(checkouts), i):
                    runs[name].append(measure_with(checkouts[name], url, args.requests, inflight))
            medians = {name: median(values) for name, values in runs.items()}
            ratio = f" ×{medians['this tree'] / medians['base']:.2f} |" if args.base else ""
            rows.append(f"| {inflight} | " + " | ".join(f"{value:.3f}" for value in medians.values()) + " |" + ratio)
    finally:
        stub.kill()
        stub.wait()
    body = (
        f"{note}. `python -m bench.model_post_cpu{' --base <checkout>' if args.base else ''} --inflight "
        f"{' '.join(map(str, args.inflight))} --requests {args.requests} --repeat {args.repeat}`: "
        f"tests/support/openai_stub.py with {args.latency_ms:g} ms latency in another process; each measurement a "
        f"fresh process (connections warmed first), medians of {args.repeat} per checkout, alternating which "
        "runs first.\n\n" + "\n".join(rows)
    )
    print(body)
    if not args.no_write:
        write_section("model_post_cpu", "Model call CPU over HTTP", body)


if __name__ == "__main__":
    main()
