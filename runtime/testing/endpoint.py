"""An OpenAI-compatible endpoint at the HTTP layer, for testing the real `OpenAIModelClient`: `ScriptedOpenAI`
(mount its `handle` with respx or any httpx mock) and `http_error`. It streams a body to a `stream: true` request
(`runtime.testing.sse`).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import httpx

from pagemind.runtime.model.client import OpenAIModelClient
from pagemind.runtime.testing.prompt_cache import PromptCache
from pagemind.runtime.testing.sse import streamed_response

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
