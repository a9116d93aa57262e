"""Re-record the traces in tests/traces/ on purpose, after a deliberate change of behaviour.

    .venv/bin/python tests/traces/record.py              # every scenario
    .venv/bin/python tests/traces/record.py tool_errors  # some

Each scenario drives the real runtime (SQLite in a temporary folder, compiler, loop, tools, pressure monitor)
with a scripted model and a fixed clock, and writes `tests/traces/<name>.jsonl`. The test suite
(tests/runtime/trace/test_trace_corpus.py) replays every file here: when a change to the compiler or the loop changes what
the model would be sent or what the tools do, those tests fail with the first divergence. If the change is
intended, re-record with this script and commit the new traces along with the change (review `git diff` of the
prompts it shows: that diff *is* the behaviour change).
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent.parent))

from pagemind.runtime.agent import Agent
from pagemind.runtime.loop import run_turn
from pagemind.runtime.model.client import ModelRequest
from pagemind.runtime.process.logs import configure_logging
from pagemind.runtime.process.settings import Settings
from pagemind.runtime.spec.agent import AgentSpec
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.clock import ManualClock
from pagemind.runtime.testing.models import FunctionModel, ScriptedModel, by_purpose, is_pressure_alert
from pagemind.runtime.testing.responses import call, reply_body, tool_call_body, tool_calls_body
from pagemind.runtime.testing.specs import spec_data
from pagemind.runtime.trace.recorder import record

HERE = Path(__file__).parent
START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)  # a Monday

SPEC: dict[str, Any] = spec_data(
    "tracer",
    system="You are a test agent. Keep facts about the user in the human block; reply with send_message.",
    persona="I am a careful assistant.",
    human_limit=120,
    max_steps_per_turn=6,
)


async def _agent(spec: dict[str, Any], model: Any, home: Path, clock: ManualClock) -> Agent:
    settings = Settings(home=home, database_url=f"sqlite:///{home / 'state.db'}")  # nothing from the environment
    store = StateStore(make_engine(settings.database_url))
    return await Agent.load(AgentSpec.model_validate(spec), model=model, store=store, settings=settings, clock=clock)


async def core_memory_turn(home: Path, clock: ManualClock, out: Path) -> None:
    """One multi-step turn: append, replace, then send_message."""
    model = ScriptedModel(
        [
            tool_call_body(
                "core_memory_append", {"label": "human", "content": "Name: Lin. Allergic to peanuts."}, "c1"
            ),
            tool_call_body(
                "core_memory_replace",
                {"label": "human", "old_content": "Name: Lin.", "new_content": "Name: Lin Wei."},
                "c2",
            ),
            tool_call_body("send_message", {"message": "Nice to meet you, Lin!"}, "c3"),
        ]
    )
    agent = await _agent(SPEC, model, home, clock)
    record(agent, path=out)
    await run_turn(agent, "Hi, I'm Lin Wei. I'm allergic to peanuts.")


async def tool_errors(home: Path, clock: ManualClock, out: Path) -> None:
    """Every kind of bad tool call comes back to the model as a result, and the turn goes on."""
    model = ScriptedModel(
        [
            tool_call_body("core_memory_append", '{"label": "human", "content": ', "e1"),  # broken JSON
            tool_calls_body(
                call("teleport", {"to": "mars"}, "e2"),  # unknown tool, with a valid call beside it
                call("core_memory_append", {"label": "human", "content": "Likes tea."}, "e3"),
            ),
            tool_call_body("core_memory_append", {"label": "human", "content": "x" * 500}, "e4"),  # over the limit
            tool_call_body(
                "core_memory_replace",
                {"label": "constraints", "old_content": "peanuts", "new_content": "nothing"},
                "e5",
            ),  # read-only block
            tool_call_body("send_message", {"text": "wrong argument name"}, "e6"),  # invalid arguments
            tool_call_body("send_message", {"message": "Sorry about that. Noted: you like tea."}, "e7"),
        ]
    )
    agent = await _agent(SPEC, model, home, clock)
    record(agent, path=out)
    await run_turn(agent, "I like tea. Please do everything wrong first.")


async def two_days(home: Path, clock: ManualClock, out: Path) -> None:
    """Two turns a day apart: the clock in the prompt moves, a block is rewritten, a plain reply ends a turn."""
    model = ScriptedModel(
        [
            tool_call_body("core_memory_append", {"label": "human", "content": "Has a sister, Mei."}, "d1"),
            tool_call_body("send_message", {"message": "Say hi to Mei!"}, "d2"),
            tool_call_body(
                "memory_rethink", {"label": "human", "new_value": "Sister: Mei (visits on Saturday)."}, "d3"
            ),
            reply_body("Enjoy Saturday with Mei."),
        ]
    )
    agent = await _agent(SPEC, model, home, clock)
    record(agent, path=out)
    await run_turn(agent, "My sister Mei is coming over.")
    clock.advance(days=1, hours=2, minutes=30)
    await run_turn(agent, "Mei visits on Saturday, not today.")


async def external_memory(home: Path, clock: ManualClock, out: Path) -> None:
    """Archival memory (insert, then search a day later) and recall memory (conversation_search), with the shipped
    embedding model and the embedded vector store."""
    spec = {
        **SPEC,
        "tools": [
            "send_message",
            "core_memory_append",
            "archival_memory_insert",
            "archival_search",
            "conversation_search",
        ],
    }
    model = ScriptedModel(
        [
            tool_call_body(
                "archival_memory_insert",
                {"content": "Lin's sister Mei lives in Lyon and loves hiking.", "tags": ["family"]},
                "x1",
            ),
            tool_call_body("send_message", {"message": "Lyon is lovely!"}, "x2"),
            tool_calls_body(
                call("archival_search", {"query": "where does Mei live"}, "x3"),
                call("conversation_search", {"query": "Lyon", "roles": ["user"]}, "x4"),
            ),
            tool_call_body("send_message", {"message": "Mei lives in Lyon."}, "x5"),
        ]
    )
    agent = await _agent(spec, model, home, clock)
    record(agent, path=out)
    await run_turn(agent, "My sister Mei lives in Lyon. She loves hiking.")
    clock.advance(days=1)
    await run_turn(agent, "Where does my sister live again?")


def _pressure_step(request: ModelRequest) -> dict[str, Any]:
    if is_pressure_alert(request):  # the pressure warning: save what matters first
        return tool_call_body("core_memory_append", {"label": "human", "content": "Lives in Oslo; walks daily."})
    return tool_call_body("send_message", {"message": "That sounds like a lovely walk."})


PRESSURE_MODEL = by_purpose(
    _pressure_step,
    summarize="Lin talked about a week of walks in Oslo, the weather and the ferry to Hovedøya.",
    extract='{"facts": [{"text": "Lin lives in Oslo.", "importance": 0.6}]}',
)


async def pressure_flush(home: Path, clock: ManualClock, out: Path) -> None:
    """A small window fills turn by turn: one warning (the model saves a fact), then a flush with its summary."""
    # The window tracks the tool schemas' size (2,600 when they were 64 tokens longer), so that the warning comes on
    # day 8 and the flush on day 10 as they always did.
    spec = {**SPEC, "model": {"name": "gpt-4o-mini", "context_window": 2536, "max_output_tokens": 300}}
    agent = await _agent(spec, FunctionModel(PRESSURE_MODEL), home, clock)
    record(agent, path=out)
    walk = (
        "Today I walked along the harbour in Oslo, past the fortress and the opera house, then took the ferry "
        "to Hovedøya and back. The weather was cold but clear, and the light on the water was beautiful. "
    )
    for day in range(12):
        clock.now = START + timedelta(days=day, hours=8)
        await run_turn(agent, f"Day {day + 1}: {walk * 2}")


SCENARIOS: dict[str, Callable[[Path, ManualClock, Path], Awaitable[None]]] = {
    "core_memory_turn": core_memory_turn,
    "tool_errors": tool_errors,
    "two_days": two_days,
    "pressure_flush": pressure_flush,
    "external_memory": external_memory,
}


async def record_scenario(name: str, out_dir: Path = HERE) -> Path:
    """Record one scenario into `out_dir/<name>.jsonl` (replacing it)."""
    out = out_dir / f"{name}.jsonl"
    out.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        await SCENARIOS[name](Path(tmp), ManualClock(START), out)
    return out


def main(names: list[str]) -> None:
    configure_logging("ERROR")
    for name in names or list(SCENARIOS):
        if name not in SCENARIOS:
            raise SystemExit(f"unknown scenario {name!r}; known: {', '.join(SCENARIOS)}")
        path = asyncio.run(record_scenario(name))
        sys.stdout.write(f"recorded {path.relative_to(HERE.parent.parent)} ({path.stat().st_size:,} bytes)\n")


if __name__ == "__main__":
    main(sys.argv[1:])
