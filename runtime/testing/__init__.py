"""Test doubles for pagemind: drive the real runtime with no model, no network and no wall clock
(`doubles`), and streamed completions as a provider sends them (`sse`).
"""

from pagemind.runtime.testing.doubles import (
    BASE_URL,
    DEFAULT_START,
    NO_FACTS,
    TEST_API_KEY,
    FakeEmbedder,
    FunctionModel,
    ManualClock,
    RecordingArchival,
    ScriptedModel,
    ScriptedOpenAI,
    build_spec,
    by_purpose,
    call,
    http_error,
    is_pressure_alert,
    reply_body,
    spec_data,
    tool_call_body,
    tool_calls_body,
    tool_context,
)
from pagemind.runtime.testing.sse import sse_bytes, stream_chunks, streamed_response

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
