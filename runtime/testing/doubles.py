"""Test doubles for pagemind: drive the real runtime with no model, no network and no wall clock.

Everything here stands in for one thing the runtime talks to, so that tests (ours or yours), benchmarks and
`pagemind demo` run offline and repeat exactly:

- responses: `reply_body`, `tool_call_body`, `tool_calls_body` and `call` build chat-completions bodies;
- models (`ModelClient`s with no HTTP): `ScriptedModel` serves bodies in order, `FunctionModel` answers with a
  function of the request; `by_purpose` routes the runtime's own calls (summaries, extractions) apart from the
  agent's steps, and `is_pressure_alert` tells a request that carries the pressure warning;
- `ScriptedOpenAI` and `http_error`: an OpenAI-compatible endpoint at the HTTP layer, for testing the real
  `OpenAIModelClient` (mount `ScriptedOpenAI.handle` with respx or any httpx mock); it streams a body to a
  `stream: true` request (`runtime.testing.sse` builds streamed responses);
- `ManualClock`: the agent's clock, moved only by the test;
- `FakeEmbedder`: vectors chosen by the test, deterministic pseudo-random ones otherwise;
- `RecordingArchival`: an archival memory that keeps what it is given;
- `tool_context`: what a tool sees in a step, for calling tools without an agent;
- `spec_data` / `build_spec`: a small agent spec (the one the test suite and its recorded traces use).

Example::

    from pagemind.runtime.agent import Agent
    from pagemind.runtime.loop import run_turn
    from pagemind.runtime.testing.doubles import ManualClock, ScriptedModel, build_spec, tool_call_body

    model = ScriptedModel([
        tool_call_body("core_memory_append", {"label": "human", "content": "Name: Lin."}),
        tool_call_body("send_message", {"message": "Hi Lin!"}),
    ])
    clock = ManualClock()  # 2026-11-29 15:00 UTC until moved
    agent = await Agent.load(build_spec(), model=model, clock=clock)  # state under PAGEMIND_HOME, as for any agent
    assert (await run_turn(agent, "Hi, I'm Lin.")).reply == "Hi Lin!"
    assert agent.memory.get("human").value == "Name: Lin."
    clock.advance(days=1)  # the next turn happens a day later

Nothing in the runtime imports this module except the demo (`runtime/cli/demo.py`).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import threading
import uuid
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import numpy as np

from pagemind.blocks import CoreMemory
from pagemind.runtime.agent import StepContext
from pagemind.runtime.model.client import ModelRequest, ModelResponse, OpenAIModelClient, response_from_body
from pagemind.runtime.spec.agent import AgentSpec
from pagemind.runtime.testing.prompt_cache import PromptCache
from pagemind.runtime.testing.sse import streamed_response
from pagemind.tools import ArchivalMemory, RecallMemory
from pagemind.tools.context import ArchivalHit, InsertResult

# -- responses --------------------------------------------------------------------------------------------------


def _body(message: dict[str, Any], finish_reason: str) -> dict[str, Any]:
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex[:12]}",
        "object": "chat.completion",
        "created": 0,
        "model": "scripted",
        "choices": [{"index": 0, "message": message, "finish_reason": finish_reason}],
        "usage": {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0},
    }


def call(name: str, arguments: dict[str, Any] | str | None = None, call_id: str | None = None) -> dict[str, Any]:
    """One tool call entry; `arguments` may be a raw (even broken) JSON string."""
    raw = arguments if isinstance(arguments, str) else json.dumps(arguments or {})
    return {
        "id": call_id or f"call_{uuid.uuid4().hex[:10]}",
        "type": "function",
        "function": {"name": name, "arguments": raw},
    }


def tool_calls_body(*calls: dict[str, Any], content: str | None = None) -> dict[str, Any]:
    """A chat-completions body whose message carries these tool calls (built with `call`)."""
    return _body({"role": "assistant", "content": content, "tool_calls": list(calls)}, "tool_calls")


def tool_call_body(
    name: str, arguments: dict[str, Any] | str | None = None, call_id: str | None = None
) -> dict[str, Any]:
    """A chat-completions body with a single tool call."""
    return tool_calls_body(call(name, arguments, call_id))


def reply_body(text: str) -> dict[str, Any]:
    """A chat-completions body with a plain assistant reply."""
    return _body({"role": "assistant", "content": text}, "stop")


# -- models -----------------------------------------------------------------------------------------------------

Body = dict[str, Any]
Respond = Callable[[ModelRequest], Body | Awaitable[Body]]
"""A function from a request to a response body (or an awaitable of one)."""

NO_FACTS = '{"facts": []}'


class ScriptedModel:
    """Serves the given response bodies in order and keeps every request; fails loudly when it runs out."""

    def __init__(self, bodies: Sequence[Body] | None = None):
        self.bodies = list(bodies or [])
        self.requests: list[ModelRequest] = []

    def add(self, *bodies: Body) -> None:
        """Queue more responses."""
        self.bodies.extend(bodies)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """The next scripted response."""
        self.requests.append(request)
        if not self.bodies:
            raise AssertionError(f"scripted model has no response left for request #{len(self.requests)}")
        return response_from_body(self.bodies.pop(0))


class FunctionModel:
    """Answers each request with `function(request)`, a response body (the function may be async); keeps every
    request, so `len(model.requests)` inside the function is the number of this call. With `prompt_cache` set,
    each answer's usage reports the prompt tokens a caching provider would have served from its cache."""

    def __init__(self, function: Respond, prompt_cache: PromptCache | None = None):
        self.function = function
        self.requests: list[ModelRequest] = []
        self.prompt_cache = prompt_cache

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """The function's answer."""
        self.requests.append(request)
        answer = self.function(request)
        body = await answer if inspect.isawaitable(answer) else answer
        if self.prompt_cache is not None:
            body = {**body, "usage": self.prompt_cache.usage({"tools": request.tools, "messages": request.messages})}
        return response_from_body(body)


def by_purpose(
    step: Respond,
    *,
    summarize: str | Respond = "Summary of the earlier conversation.",
    extract: str | Respond = NO_FACTS,
) -> Respond:
    """A `Respond` for `FunctionModel` that answers the runtime's own calls apart from the agent's steps.

    `summarize` answers the recursive summary's requests and `extract` the fact extraction's (a string is a
    plain reply; a function answers like `step`); every other request goes to `step`."""

    def respond(request: ModelRequest) -> Body | Awaitable[Body]:
        answer = {"summarize": summarize, "extract": extract}.get(request.purpose, step)
        return reply_body(answer) if isinstance(answer, str) else answer(request)

    return respond


def is_pressure_alert(request: ModelRequest) -> bool:
    """Whether the request's last message is the pressure monitor's warning (the alert to save what matters)."""
    chat = request.messages[1:]
    if chat and chat[-1]["role"] == "system" and len(chat) > 1 and chat[-2]["role"] == "system":
        chat = chat[:-1]  # the closing restatement of the constraints
    return bool(chat) and chat[-1]["role"] == "system" and "system alert" in (chat[-1].get("content") or "")


# -- an OpenAI-compatible endpoint --------------------------------------------------------------------------------

BASE_URL = "http://scripted.test/v1"
TEST_API_KEY = "sk-test-DO-NOT-LEAK-1234567890"


def http_error(
    status: int, message: str = "error", code: str | None = None, headers: dict[str, str] | None = None
) -> httpx.Response:
    """A scripted HTTP error with an OpenAI-shaped body."""
    body = {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": code}}
    return httpx.Response(status, json=body, headers=headers or {})


@dataclass
class ScriptedOpenAI:
    """The responses an OpenAI-compatible endpoint at `BASE_URL` will give, in order, and the requests it got.

    Mount `handle` on `POST {BASE_URL}/chat/completions` (with respx, say); an exhausted script answers 418 and
    counts the request in `unexpected`. `strict=True` first rejects, as some OpenAI-compatible servers do, a request
    holding a message whose content is null or missing (except an assistant's beside tool calls) with OpenAI's 400
    shape, counted in `rejected`. A body answers a `stream: true` request as a stream of `stream_size`-character
    chunks sent in `stream_cut`-byte pieces. With `prompt_cache` set, each answer's usage says how many prompt
    tokens repeated the previous request's exactly (`runtime.testing.prompt_cache`), as a caching provider does."""

    script: list[Any] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[httpx.Headers] = field(default_factory=list)
    unexpected: int = 0
    sleeps: list[float] = field(default_factory=list)
    strict: bool = False
    rejected: int = 0
    stream_size: int = 3
    stream_cut: int = 5
    prompt_cache: PromptCache | None = None

    def add(self, *items: Any) -> ScriptedOpenAI:
        """Queue response bodies (dicts), httpx.Responses, or exceptions to raise at the transport."""
        self.script.extend(items)
        return self

    def handle(self, request: httpx.Request) -> httpx.Response:
        """Answer one HTTP request with the next scripted item."""
        body = json.loads(request.content)
        self.requests.append(body)
        self.headers.append(request.headers)
        if self.strict:
            for index, message in enumerate(body["messages"]):
                if not isinstance(message.get("content"), str) and not message.get("tool_calls"):
                    self.rejected += 1
                    return http_error(400, f"messages[{index}].content: expected a string, got null")
        if not self.script:
            self.unexpected += 1
            return http_error(418, "scripted_openai: unexpected request (script exhausted)")
        item = self.script.pop(0)
        if isinstance(item, BaseException):
            raise item
        if isinstance(item, httpx.Response):
            return item
        if self.prompt_cache is not None:
            item = {**item, "usage": self.prompt_cache.usage(body)}
        if body.get("stream"):
            return streamed_response(item, size=self.stream_size, cut=self.stream_cut)
        return httpx.Response(200, json=item)

    async def fake_sleep(self, seconds: float) -> None:
        """Note a backoff instead of sleeping it."""
        self.sleeps.append(seconds)

    def client(self, max_attempts: int = 4) -> OpenAIModelClient:
        """A real OpenAIModelClient pointed at this script; backoff sleeps are recorded, not slept."""
        import openai  # only the HTTP-layer tests need the SDK; the demo imports this module without them

        sdk = openai.AsyncOpenAI(api_key=TEST_API_KEY, base_url=BASE_URL, max_retries=0)
        return OpenAIModelClient(sdk, max_attempts=max_attempts, sleep=self.fake_sleep)


# -- the clock --------------------------------------------------------------------------------------------------

DEFAULT_START = datetime(2026, 11, 29, 15, 0, tzinfo=UTC)


class ManualClock:
    """The agent's clock (`clock=` wherever the runtime takes one): it reads `now`, which moves only when the test
    sets it or calls `advance`."""

    def __init__(self, start: datetime = DEFAULT_START):
        self.now = start

    def __call__(self) -> datetime:
        return self.now

    def advance(self, delta: timedelta | None = None, **parts: float) -> datetime:
        """Move forward by `delta` and/or `timedelta(**parts)` (`advance(days=1, hours=2)`); returns the new time."""
        self.now += (delta or timedelta()) + timedelta(**parts)
        return self.now


# -- embeddings -------------------------------------------------------------------------------------------------


class FakeEmbedder:
    """An `Embedder` whose vectors the test chooses, so similarities sit exactly where a test needs them.

    A text in `vectors` gets its vector; any other text a fixed pseudo-random unit vector (seeded by the text) in
    the upper half of the space, so vectors chosen in the lower half stay far from them. Keeps every text it
    embedded (`texts`) and counts calls; with a `barrier`, each call waits there (for tests of concurrency)."""

    model_id: str = "fake"
    dim: int = 64

    def __init__(
        self,
        vectors: dict[str, np.ndarray] | None = None,
        *,
        dim: int | None = None,
        model_id: str | None = None,
        barrier: threading.Barrier | None = None,
    ):
        self.vectors = dict(vectors or {})
        self.dim = dim or self.dim
        self.model_id = model_id or self.model_id
        self.barrier = barrier
        self.calls = 0
        self.texts: list[str] = []

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """One unit vector per text, as a float32 array of shape (len(texts), dim)."""
        self.calls += 1
        self.texts += list(texts)
        if self.barrier is not None:
            self.barrier.wait(timeout=10)  # two calls meet here only if they run at the same time
        return np.vstack([self.vector(t) for t in texts]) if texts else np.zeros((0, self.dim), np.float32)

    def vector(self, text: str) -> np.ndarray:
        """The vector for one text."""
        if text in self.vectors:
            return self.vectors[text]
        seed = int(hashlib.sha256(text.encode()).hexdigest()[:12], 16)
        v = np.zeros(self.dim, dtype=np.float32)
        v[self.dim // 2 :] = np.random.default_rng(seed).normal(size=self.dim - self.dim // 2)
        return v / np.linalg.norm(v)


# -- archival memory --------------------------------------------------------------------------------------------


class RecordingArchival:
    """An `ArchivalMemory` that keeps what it is asked to insert and finds nothing: for testing what the runtime
    sends to archival memory (the write path itself is tested with the real service).

    Each insert is kept in `inserted` as a dict of the content and the arguments given (those left unset are
    left out)."""

    context_messages = 2  # as the real service's default (`memory.archival.context_messages`)

    def __init__(self) -> None:
        self.inserted: list[dict[str, Any]] = []

    async def insert(
        self,
        content: str,
        *,
        kind: str = "fact",
        tags: list[str] | None = None,
        importance: float | None = None,
        source_message_ids: list[int] | None = None,
        expires_at: datetime | None = None,
    ) -> InsertResult:
        """Keep the memory; it is always new."""
        given = {
            "tags": tags,
            "importance": importance,
            "source_message_ids": source_message_ids,
            "expires_at": expires_at,
        }
        self.inserted.append({"content": content, "kind": kind, **{k: v for k, v in given.items() if v is not None}})
        return InsertResult(action="inserted", id=str(len(self.inserted)), text=content, kind=kind)

    async def search(
        self,
        query: str,
        *,
        tags: list[str] | None = None,
        start_date: datetime | None = None,
        end_date: datetime | None = None,
        top_k: int | None = None,
        page: int = 1,
        count_hits: bool = True,
        seen: bool = False,
    ) -> list[ArchivalHit]:
        """Nothing is ever found."""
        return []

    def stats(self) -> tuple[int, tuple[str, ...]]:
        """(memories inserted, no tags)."""
        return len(self.inserted), ()


def tool_context(
    agent_name: str = "tester",
    *,
    core_memory: CoreMemory | None = None,
    clock: Callable[[], datetime] | None = None,
    archival: ArchivalMemory | None = None,
    recall: RecallMemory | None = None,
) -> StepContext:
    """What a tool sees during a step (a `tools.ToolContext`), for calling tools without an agent: no core blocks
    and a `ManualClock` unless given."""
    return StepContext(
        agent_name=agent_name,
        core_memory=core_memory or CoreMemory([]),
        clock=clock or ManualClock(),
        archival=archival,
        recall=recall,
    )


# -- agent specs ------------------------------------------------------------------------------------------------


def spec_data(
    name: str = "tester",
    *,
    system: str = "You are a test agent.",
    persona: str = "I am a careful tester.",
    human: str = "",
    human_limit: int = 100,
    constraints: str = "Never suggest peanuts.",
    model_name: str = "gpt-4o-mini",
    context_window: int = 8192,
    max_output_tokens: int = 256,
    max_steps_per_turn: int = 4,
    **fields: Any,
) -> dict[str, Any]:
    """A small agent spec as YAML would give it (a fresh dict each call): three blocks (persona, human and a
    read-only constraints block), the default tools. `fields` add or replace top-level keys (`tools`, `memory`,
    even `blocks` or `model` whole).

    The defaults are the test suite's agent; the recorded traces (tests/traces/record.py) use another name,
    system prompt, persona, human limit and step bound."""
    data: dict[str, Any] = {
        "name": name,
        "model": {"name": model_name, "context_window": context_window, "max_output_tokens": max_output_tokens},
        "system": system,
        "blocks": [
            {"label": "persona", "value": persona, "limit": 200, "description": "Who I am."},
            {"label": "human", "value": human, "limit": human_limit, "description": "What I know about the user."},
            {"label": "constraints", "value": constraints, "limit": 200, "read_only": True},
        ],
        "max_steps_per_turn": max_steps_per_turn,
    }
    return {**data, **fields}


def build_spec(name: str = "tester", **options: Any) -> AgentSpec:
    """`spec_data(name, **options)`, validated into an `AgentSpec`."""
    return AgentSpec.model_validate(spec_data(name, **options))
