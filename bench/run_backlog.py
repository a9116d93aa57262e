"""What a daemon keeps of a run in flight for late subscribers (`scheduler.streams.fanout`): its events so far, the
model requests and responses without their bodies (`events.without_body`), against keeping them whole (as before).

A real agent (agents/companion.yaml, SQLite) whose stored conversation already holds `--history` messages of about
400 characters (the pressure monitor summarises most of them away, as in a long chat) runs one turn of `--steps`
steps (an instant model: `conversation_search` calls, then `send_message`), its events published to a `RunFanout` as
the daemon does. The figure is what the backlog alone keeps alive at the turn's end: the Python heap (tracemalloc)
before and after the run is forgotten, garbage collected both times. Both variants in one process, alternating,
`--rounds` each; medians.

    python -m bench.run_backlog [--history 200] [--steps 8] [--rounds 3] [--no-write]
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import tempfile
import tracemalloc
from pathlib import Path

from bench.common import machine_note, median, write_section
from pagemind.runtime.agent import Agent
from pagemind.runtime.messages import Message
from pagemind.runtime.model.client import ModelRequest
from pagemind.runtime.process.logs import configure_logging
from pagemind.runtime.spec.loading import load_spec
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.records import utcnow
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.models import FunctionModel
from pagemind.runtime.testing.responses import reply_body, tool_call_body
from pagemind.scheduler.streams import fanout as fanout_module
from pagemind.scheduler.streams.fanout import RunFanout

KEEP = fanout_module.without_body  # what the fanout keeps now; the "whole" variant swaps in the identity
LINE = "We talked about the garden, the tea from Yunnan and the trip to Lyon next spring; " * 5


def model(steps: int) -> FunctionModel:
    """`steps - 1` searches, then the reply (the runtime's own calls answered plainly)."""

    def answer(request: ModelRequest) -> dict:
        if request.purpose != "step":
            return reply_body('{"facts": []}')
        done = sum(m["role"] == "tool" for m in request.messages)
        if done + 1 < steps:
            return tool_call_body("conversation_search", {"query": f"tea {done}"}, f"c{done}")
        return tool_call_body("send_message", {"message": "ok, noted"}, "last")

    return FunctionModel(answer)


async def retained(home: Path, name: str, history: int, steps: int, whole: bool) -> tuple[int, int]:
    """(bytes only the backlog kept alive, events kept) for one turn."""
    store = StateStore(make_engine(f"sqlite:///{home / f'{name}.db'}"))
    spec = load_spec("agents/companion.yaml")
    agent = await Agent.load(spec, model=model(steps), store=store)
    store.append_messages(
        agent.record.id,
        [
            Message("user" if n % 2 == 0 else "assistant", f"{n}: {LINE}", utcnow(), in_context=True)
            for n in range(history)
        ],
    )
    scripted = model(steps)
    agent = await Agent.load(spec, model=scripted, store=store)  # the window as the history left it
    fanout = RunFanout()
    fanout_module.without_body = (lambda event: event) if whole else KEEP  # the variant
    fanout.begin("run", attempt=1)
    agent.observer = fanout.observer("run")
    await agent.send("what did we say about tea?")
    scripted.requests.clear()  # the test double keeps every request; a real model client keeps none
    kept = len(fanout._runs["run"].events)
    gc.collect()
    before = tracemalloc.get_traced_memory()[0]
    fanout.forget("run")
    gc.collect()
    freed = before - tracemalloc.get_traced_memory()[0]
    store.engine.dispose()
    return freed, kept


async def main(args: argparse.Namespace) -> str:
    tracemalloc.start()
    found: dict[str, list[int]] = {"whole": [], "without bodies": []}
    events = 0
    with tempfile.TemporaryDirectory() as tmp:
        for n in range(args.rounds):
            order = ("whole", "without bodies") if n % 2 == 0 else ("without bodies", "whole")
            for variant in order:
                freed, events = await retained(
                    Path(tmp), f"{variant[0]}{n}", args.history, args.steps, variant == "whole"
                )
                found[variant].append(freed)
    fanout_module.without_body = KEEP
    whole, lean = median(found["whole"]), median(found["without bodies"])
    return (
        f"{machine_note()} (load matters little here: bytes, not time).\n\nOne turn of {args.steps} steps after "
        f"{args.history} stored messages (≈ {len(LINE)} characters each), {events} events kept; bytes the backlog "
        f"alone kept alive at the turn's end (tracemalloc, medians of {args.rounds}):\n\n"
        "| backlog | bytes kept | vs whole |\n| --- | --- | --- |\n"
        f"| events whole (before) | {whole:,.0f} | 1.00 |\n"
        f"| model bodies left out (`events.without_body`) | {lean:,.0f} | {lean / whole:.3f} |\n\n"
        f"Rounds: whole {found['whole']}, without bodies {found['without bodies']}. A subscriber there when an "
        f"event happens still gets it whole; the bodies are the trace's business."
    )


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--history", type=int, default=200)
    parser.add_argument("--steps", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-write", action="store_true")
    arguments = parser.parse_args()
    configure_logging("WARNING")
    report = asyncio.run(main(arguments))
    print(report)
    if not arguments.no_write:
        write_section("run_backlog", "A run's event backlog without model bodies", report)
