"""Test doubles for pagemind: drive the real runtime with no model, no network and no wall clock.

Each module stands in for one thing the runtime talks to, so that tests (ours or yours), benchmarks and
`pagemind demo` run offline and repeat exactly:

- `responses`: `reply_body`, `tool_call_body`, `tool_calls_body` and `call` build chat-completions bodies;
- `models` (`ModelClient`s with no HTTP): `ScriptedModel` serves bodies in order, `FunctionModel` answers with a
  function of the request; `by_purpose` routes the runtime's own calls (summaries, extractions) apart from the
  agent's steps, and `is_pressure_alert` tells a request that carries the pressure warning;
- `endpoint`: `ScriptedOpenAI` and `http_error`, an OpenAI-compatible endpoint at the HTTP layer, for testing the
  real `OpenAIModelClient` (mount `ScriptedOpenAI.handle` with respx or any httpx mock); it streams a body to a
  `stream: true` request (`sse` builds streamed responses; `prompt_cache` counts what a caching provider would
  serve from its cache);
- `clock`: `ManualClock`, the agent's clock, moved only by the test;
- `embedder`: `FakeEmbedder`, vectors chosen by the test, deterministic pseudo-random ones otherwise;
- `archival`: `RecordingArchival`, an archival memory that keeps what it is given;
- `step_context`: `tool_context`, what a tool sees in a step, for calling tools without an agent;
- `specs`: `spec_data` / `build_spec`, a small agent spec (the one the test suite and its recorded traces use).

Every name is also importable from this package. Example::

    from pagemind.runtime.agent import Agent
    from pagemind.runtime.loop import run_turn
    from pagemind.runtime.testing import ManualClock, ScriptedModel, build_spec, tool_call_body

    model = ScriptedModel([
        tool_call_body("core_memory_append", {"label": "human", "content": "Name: Lin."}),
        tool_call_body("send_message", {"message": "Hi Lin!"}),
    ])
    clock = ManualClock()  # 2026-11-29 15:00 UTC until moved
    agent = await Agent.load(build_spec(), model=model, clock=clock)  # state under PAGEMIND_HOME, as for any agent
    assert (await run_turn(agent, "Hi, I'm Lin.")).reply == "Hi Lin!"
    assert agent.memory.get("human").value == "Name: Lin."
    clock.advance(days=1)  # the next turn happens a day later

Nothing in the runtime imports this package except the demo (`runtime/cli/demo.py`).
"""

from pagemind.runtime.testing.archival import RecordingArchival
from pagemind.runtime.testing.clock import DEFAULT_START, ManualClock
from pagemind.runtime.testing.embedder import FakeEmbedder
from pagemind.runtime.testing.endpoint import BASE_URL, TEST_API_KEY, ScriptedOpenAI, http_error
from pagemind.runtime.testing.models import NO_FACTS, FunctionModel, ScriptedModel, by_purpose, is_pressure_alert
from pagemind.runtime.testing.responses import call, reply_body, tool_call_body, tool_calls_body
from pagemind.runtime.testing.specs import build_spec, spec_data
from pagemind.runtime.testing.sse import sse_bytes, stream_chunks, streamed_response
from pagemind.runtime.testing.step_context import tool_context

__all__ = [
    "BASE_URL",
    "DEFAULT_START",
    "NO_FACTS",
    "TEST_API_KEY",
    "FakeEmbedder",
    "FunctionModel",
    "ManualClock",
    "RecordingArchival",
    "ScriptedModel",
    "ScriptedOpenAI",
    "build_spec",
    "by_purpose",
    "call",
    "http_error",
    "is_pressure_alert",
    "reply_body",
    "spec_data",
    "sse_bytes",
    "stream_chunks",
    "streamed_response",
    "tool_call_body",
    "tool_calls_body",
    "tool_context",
]
