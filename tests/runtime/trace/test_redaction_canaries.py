"""`pagemind trace export --redact` leaves no user, memory or tool text anywhere in the file: a real session with
the testing doubles, one trace per turn, plants a distinct canary word in every place a trace can carry text —
block values in the header (spec and snapshot), the window's earlier messages and the summary in the snapshot,
user messages, the model's text beside a tool call, tool arguments and results (a custom tool's too), memory
edits, archival inserts and the memories prefetched into the prompt, archival and recall reads (`memory_read`
lines), a flush's summary and extracted facts — and finds none of them in any exported file's bytes, while every
exported file still reads as a trace."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from pagemind.runtime.agent import Agent
from pagemind.runtime.events import FlushEvent, MemoryReadEvent
from pagemind.runtime.model.client import ModelRequest
from pagemind.runtime.process.settings import Settings
from pagemind.runtime.spec.agent import BlockSpec
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.clock import ManualClock
from pagemind.runtime.testing.models import FunctionModel
from pagemind.runtime.testing.responses import call, reply_body, tool_call_body, tool_calls_body
from pagemind.runtime.testing.specs import build_spec
from pagemind.runtime.trace.reader import read_trace
from pagemind.runtime.trace.recorder import record

CANARIES = {
    "persona": "quokkapersona",
    "human block seed": "bilbyseed",
    "first user message": "wombatuser",
    "assistant text": "kiwithought",
    "memory edit": "numbatedit",
    "reply": "dingoreply",
    "archival insert": "sertralinearch",
    "archival tag": "tagcassowary",
    "archival query": "querylyrebird",
    "custom tool argument": "cityemu",
    "custom tool result": "resultplatypus",
    "chat": "echidnachat",
    "summary": "summarywallaby",
    "extracted fact": "factpossum",
    "profile seed": "goannaseed",
    "profile field": "sertralineprofile",
    "profile key": "Quollkey",
}
FILLER = "The harbour was calm and the ferries came and went under a grey sky all afternoon. " * 12


def weather_note(city: str) -> str:
    """A custom tool whose result carries text of its own.

    Args:
        city: where.
    """
    return f"Forecast for {city}: {CANARIES['custom tool result']} and sunny."


TURNS = [
    f"Hi, I'm Lin. My grandmother is {CANARIES['first user message']}.",
    f"REMEMBER: I take {CANARIES['archival insert']} every morning.",
    "ASK: what medication do I take",
    "RECALL: grandmother",
    "WEATHER: tomorrow",
    *(f"Day note {n}: {CANARIES['chat']} {FILLER}" for n in range(6)),
    "ASK: what medication do I take",
]


def _step(request: ModelRequest) -> dict[str, Any]:
    last = [m for m in request.messages if m["role"] != "system"][-1]
    if last["role"] == "tool":
        return tool_call_body("send_message", {"message": f"Noted, {CANARIES['reply']}."})
    text = str(last.get("content") or "")
    if text.startswith("Hi"):
        edit = call("core_memory_append", {"label": "human", "content": f"Grandmother: {CANARIES['memory edit']}."})
        person = {"relation": "cousin", "notes": f"takes {CANARIES['profile field']}"}
        update = call(
            "core_memory_update", {"label": "profile", "changes": {"people": {CANARIES["profile key"]: person}}}
        )
        return tool_calls_body(edit, update, content=f"I should remember {CANARIES['assistant text']}.")
    if text.startswith("REMEMBER"):
        fact = {"content": f"Lin takes {CANARIES['archival insert']} daily.", "tags": [CANARIES["archival tag"]]}
        return tool_call_body("archival_memory_insert", fact)
    if text.startswith("ASK"):
        return tool_call_body("archival_search", {"query": f"medication {CANARIES['archival query']}"})
    if text.startswith("RECALL"):
        return tool_call_body("conversation_search", {"query": "grandmother"})
    if text.startswith("WEATHER"):
        return tool_call_body("weather_note", {"city": CANARIES["custom tool argument"]})
    return reply_body("That sounds like a calm day.")


def respond(request: ModelRequest) -> dict[str, Any]:
    match request.purpose:
        case "summarize":
            return reply_body(f"Lin talked about the harbour ({CANARIES['summary']}).")
        case "extract":
            fact = {"text": f"Lin watches the ferries {CANARIES['extracted fact']}.", "importance": 0.8}
            return reply_body(json.dumps({"facts": [fact]}))
        case "step":
            return _step(request)
        case _:
            return reply_body("{}")


def _session(home: Path) -> list[Path]:
    profile = {
        "label": "profile",
        "schema": "pagemind.blocks.profiles:CompanionProfile",
        "limit": 1500,
        "value": {"name": CANARIES["profile seed"]},
    }
    spec = build_spec(
        "canary",
        persona=f"I am a companion called {CANARIES['persona']}.",
        human=f"Seed: {CANARIES['human block seed']}.",
        human_limit=400,
        context_window=2600,
        max_steps_per_turn=4,
        tools=[
            "send_message",
            "core_memory_append",
            "core_memory_update",
            "archival_memory_insert",
            "archival_search",
            "conversation_search",
            f"{__name__}:weather_note",
        ],
        memory={"memories_per_turn": 3},
    )
    spec.blocks.append(BlockSpec.model_validate(profile))
    settings = Settings(home=home, database_url=f"sqlite:///{home / 'state.db'}")

    async def go() -> None:
        clock = ManualClock()
        store = StateStore(make_engine(settings.database_url))
        agent = await Agent.load(spec, model=FunctionModel(respond), store=store, settings=settings, clock=clock)
        recorder = record(agent, directory=home / "traces")
        try:
            for text in TURNS:
                clock.advance(minutes=3)
                await agent.send(text)
        finally:
            recorder.close()
            store.engine.dispose()

    asyncio.run(go())
    return sorted((home / "traces").glob("*.jsonl"))


def _as_recorded_before_reads(trace: Path, out: Path) -> Path:
    """The trace as a pagemind from before traces held reads wrote it: no `memory_read` lines, header `reads` off."""
    lines = [json.loads(line) for line in trace.read_text().splitlines()]
    lines[0]["reads"] = False
    out.write_text("".join(json.dumps(line) + "\n" for line in lines if line["type"] != "memory_read"))
    return out


def test_redacted_exports_carry_no_user_memory_or_tool_text(tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    traces = _session(home)
    assert len(traces) == len(TURNS)
    everything = b"".join(t.read_bytes() for t in traces)
    for where, canary in CANARIES.items():  # the session really put each one in a trace
        assert canary.encode() in everything, where
    events = [e for t in traces for e in read_trace(t).events]
    assert any(isinstance(e, FlushEvent) for e in events)  # a flush: summary and extraction were recorded
    assert {e.source for e in events if isinstance(e, MemoryReadEvent)} >= {"archival", "recall"}

    prefetched = next(t for t in traces if b"<retrieved_memories>" in t.read_bytes())
    traces.append(_as_recorded_before_reads(prefetched, tmp_path / "old.jsonl"))  # a prefetch, no memory_read lines
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "DATABASE_URL", "QDRANT_"))}
    env["PAGEMIND_HOME"] = str(home)
    for n, trace in enumerate(traces):
        exported = tmp_path / f"shared-{n}.jsonl"
        done = subprocess.run(
            [sys.executable, "-m", "pagemind.runtime.cli.main", "trace", "export", str(trace), "--redact"]
            + ["-o", str(exported)],
            env=env,
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        data = exported.read_bytes().lower()
        leaked = [where for where, canary in CANARIES.items() if canary.lower().encode() in data]
        assert leaked == [], f"{trace.name}: {leaked}"
        assert read_trace(exported).header.redacted  # still a trace
    shown = subprocess.run(
        [sys.executable, "-m", "pagemind.runtime.cli.main", "trace", "show", str(exported)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shown.returncode == 0 and "(redacted copy" in shown.stdout, shown.stderr
