"""Against a real OpenAI-compatible server (opt-in): several turns survive whatever a tiny model says, and the
recorded trace replays identically offline.

    scripts/local-model-server.sh start            # SmolLM2-135M through llama-cpp-python, 127.0.0.1:8080
    PAGEMIND_LIVE_BASE_URL=http://127.0.0.1:8080/v1 .venv/bin/python -m pytest -m live_model tests/runtime/model/test_live_model.py

Skipped unless PAGEMIND_LIVE_BASE_URL is set; CI never sets it (and never builds the server).
PAGEMIND_LIVE_MODEL names the model (default `local`, the script's alias).
"""

import os

import pytest

from pagemind.runtime.agent import Agent
from pagemind.runtime.events import ModelResponseEvent
from pagemind.runtime.loop import run_turn
from pagemind.runtime.model.client import OpenAIModelClient
from pagemind.runtime.spec.agent import AgentSpec
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.trace.reader import read_trace
from pagemind.runtime.trace.recorder import record
from pagemind.runtime.trace.replay import format_report, replay
from pagemind.runtime.turn_outcomes import StopReason

BASE_URL = os.environ.get("PAGEMIND_LIVE_BASE_URL")

pytestmark = [
    pytest.mark.live_model,
    pytest.mark.skipif(not BASE_URL, reason="PAGEMIND_LIVE_BASE_URL is not set (see scripts/local-model-server.sh)"),
]

# Small enough for a 2,048-token server window: the pressure monitor flushes when the turns pile up.
LIVE_SPEC = {
    "name": "live",
    "model": {
        "name": os.environ.get("PAGEMIND_LIVE_MODEL", "local"),
        "base_url": BASE_URL,
        "api_key_env": "PAGEMIND_LIVE_API_KEY",
        "temperature": 0.0,
        "context_window": 2048,
        "max_output_tokens": 128,
    },
    "system": "You are a helpful companion. Save facts about the user with core_memory_append. "
    "Reply to the user with send_message.",
    "blocks": [
        {"label": "persona", "value": "I am a friendly companion.", "limit": 200},
        {"label": "human", "value": "", "limit": 300, "description": "Facts about the user."},
    ],
    "tools": ["send_message", "core_memory_append"],
    "max_steps_per_turn": 3,
}
MESSAGES = [
    "Hi, I'm Lin. I live in Oslo and I'm allergic to peanuts.",
    "I work at a bakery and start at 5am.",
    "What do you remember about me?",
]


async def test_turns_against_a_real_server_end_cleanly_and_replay_identically(tmp_path):
    spec = AgentSpec.model_validate(LIVE_SPEC)
    client = OpenAIModelClient.from_spec(spec.model, {"PAGEMIND_LIVE_API_KEY": "not-needed"}, max_attempts=2)
    agent = await Agent.load(spec, model=client, store=StateStore(make_engine(f"sqlite:///{tmp_path / 'live.db'}")))
    path = tmp_path / "live.jsonl"
    recorder = record(agent, path=path)
    for text in MESSAGES:
        result = await run_turn(agent, text)
        assert result.stop_reason in set(StopReason)  # whatever the model said, the turn ended with a reason
    recorder.close()

    trace = read_trace(path)
    assert trace.complete and len(trace.turns) == len(MESSAGES)
    responses = [e for e in trace.events if isinstance(e, ModelResponseEvent)]
    assert responses and all(e.latency_ms > 0 for e in responses)
    assert all(e.body.get("choices") for e in responses)  # raw bodies, as the server sent them

    report = await replay(trace)
    assert report.status == "identical", format_report(report)
