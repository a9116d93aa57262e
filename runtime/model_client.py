"""Calling the model: one interface, an OpenAI-compatible implementation with tenacity retries, typed errors.

`openai` is imported when a client is built, not with this module: everything that only speaks in requests and
responses (traces, replay, the monitor, the CLI's inspection commands) is spared its half-second import.
"""

from __future__ import annotations

import asyncio
import os
import random
import time
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Protocol

import httpx
import structlog
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt
from tenacity.wait import wait_base

from pagemind.runtime.spec import ModelSpec
from pagemind.tools import ToolCall

if TYPE_CHECKING:
    import openai

log = structlog.get_logger("pagemind.model")


class ModelError(RuntimeError):
    """The model could not give an answer."""


class NoModelConfigured(ModelError):
    """No endpoint or key is configured; the message says how to configure one."""


class ModelUnavailable(ModelError):
    """Retries ran out (429, 5xx, timeouts, connection errors)."""


class ModelRequestRejected(ModelError):
    """The provider refused the request (a 4xx other than 429); retrying would not help."""


class ContextLengthExceeded(ModelError):
    """The prompt is larger than the model's window; the pressure monitor flushes and retries once."""


@dataclass(frozen=True)
class ModelRequest:
    """One chat-completions request, as sent."""

    model: str
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    temperature: float
    max_tokens: int
    purpose: str = "step"  # step | summarize | extract: not sent; lets scripted models and traces tell calls apart

    def body(self) -> dict[str, Any]:
        """The JSON body (without transport details)."""
        body: dict[str, Any] = {"model": self.model, "messages": self.messages,
                                "temperature": self.temperature, "max_tokens": self.max_tokens}
        if self.tools:
            body["tools"] = self.tools
            body["tool_choice"] = "auto"
        return body


@dataclass(frozen=True)
class ModelResponse:
    """The assistant's answer: text and/or tool calls, with usage and the raw body for traces."""

    content: str | None
    tool_calls: tuple[ToolCall, ...]
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    finish_reason: str | None = None
    latency_ms: float = 0.0
    raw: dict[str, Any] = field(default_factory=dict)


class ModelClient(Protocol):
    """Anything that answers a ModelRequest: the OpenAI client, a scripted model, a trace replayer."""

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Answer one request."""
        ...


def response_from_body(body: dict[str, Any], latency_ms: float = 0.0) -> ModelResponse:
    """Parse a chat-completions response body (as recorded or as received)."""
    choice = (body.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    calls = tuple(
        # A server that omits call ids gets unique ones: a reused id would pair results with the wrong call.
        ToolCall(c.get("id") or f"call_{uuid.uuid4().hex[:12]}", (c.get("function") or {}).get("name") or "",
                 (c.get("function") or {}).get("arguments") or "")
        for c in message.get("tool_calls") or []
    )
    usage = body.get("usage") or {}
    return ModelResponse(
        content=message.get("content"), tool_calls=calls, prompt_tokens=usage.get("prompt_tokens"),
        completion_tokens=usage.get("completion_tokens"), finish_reason=choice.get("finish_reason"),
        latency_ms=latency_ms, raw=body,
    )


def _retryable(exc: BaseException) -> bool:
    import openai

    if isinstance(exc, (openai.APITimeoutError, openai.APIConnectionError)):
        return True
    return isinstance(exc, openai.APIStatusError) and (exc.status_code == 429 or exc.status_code >= 500)


def _retry_after_seconds(exc: BaseException | None) -> float | None:
    response = getattr(exc, "response", None)
    if response is None:
        return None
    header = response.headers.get("retry-after-ms")
    if header:
        try:
            return float(header) / 1000
        except ValueError:
            pass
    header = response.headers.get("retry-after")
    try:
        return float(header) if header else None
    except ValueError:
        return None  # an HTTP date: fall back to backoff


class wait_retry_after_or_jitter(wait_base):
    """Honour the server's Retry-After (capped); otherwise exponential backoff with full jitter."""

    def __init__(self, initial: float = 0.5, maximum: float = 30.0):
        self.initial, self.maximum = initial, maximum

    def __call__(self, retry_state: RetryCallState) -> float:
        exc = retry_state.outcome.exception() if retry_state.outcome else None
        hinted = _retry_after_seconds(exc)
        if hinted is not None:
            return min(max(hinted, 0.0), self.maximum)
        ceiling = min(self.maximum, self.initial * 2 ** (retry_state.attempt_number - 1))
        return random.uniform(0, ceiling)


def _is_context_length(exc: openai.BadRequestError) -> bool:
    code = getattr(exc, "code", None)
    body = exc.body if isinstance(exc.body, dict) else {}
    code = code or body.get("code") or (body.get("error") or {}).get("code")
    return code == "context_length_exceeded" or "maximum context length" in str(exc).lower()


def _log_retry(state: RetryCallState) -> None:
    exc = state.outcome.exception() if state.outcome else None
    log.warning("model_retry", attempt=state.attempt_number, error=type(exc).__name__,
                status=getattr(exc, "status_code", None),
                wait_s=round(state.next_action.sleep, 3) if state.next_action else None)


def missing_endpoint_message(api_key_env: str) -> str:
    """How to configure a model endpoint, for commands that need one."""
    return (
        f"No model endpoint is configured. Set {api_key_env} (for OpenAI), or OPENAI_BASE_URL for any "
        "OpenAI-compatible server (vLLM, Ollama, llama.cpp: e.g. OPENAI_BASE_URL=http://127.0.0.1:8080/v1), "
        "or model.base_url in the agent's YAML."
    )


class OpenAIModelClient:
    """An OpenAI-compatible chat endpoint through `openai.AsyncOpenAI`; tenacity does the retrying."""

    def __init__(
        self,
        client: openai.AsyncOpenAI,
        max_attempts: int = 5,
        wait: wait_base | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ):
        self.client = client
        self.max_attempts = max_attempts
        self.wait = wait or wait_retry_after_or_jitter()
        self.sleep = sleep

    @classmethod
    def from_spec(cls, spec: ModelSpec, environ: dict[str, str] | None = None, **kwargs: Any) -> "OpenAIModelClient":
        """A client for the spec's endpoint: base URL from the spec or OPENAI_BASE_URL, key from `api_key_env`."""
        env = os.environ if environ is None else environ
        base_url = spec.base_url or env.get("OPENAI_BASE_URL") or None
        api_key = env.get(spec.api_key_env) or None
        if not base_url and not api_key:
            raise NoModelConfigured(missing_endpoint_message(spec.api_key_env))
        import openai

        # Local servers take any key; the SDK insists on one.
        client = openai.AsyncOpenAI(api_key=api_key or "not-needed", base_url=base_url, max_retries=0,
                                    timeout=httpx.Timeout(120.0, connect=10.0))
        return cls(client, **kwargs)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Send the request, retrying transient failures; raise a typed ModelError otherwise."""
        import openai

        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.max_attempts), wait=self.wait, retry=retry_if_exception(_retryable),
            sleep=self.sleep, before_sleep=_log_retry, reraise=True,
        )
        started = time.perf_counter()
        try:
            raw = await retrying(self._send, request)
        except openai.BadRequestError as exc:
            if _is_context_length(exc):
                raise ContextLengthExceeded(str(exc)) from exc
            raise ModelRequestRejected(f"model request rejected (HTTP 400): {exc}") from exc
        except openai.APIStatusError as exc:
            if _retryable(exc):
                raise ModelUnavailable(
                    f"model endpoint failed {self.max_attempts} times; last: HTTP {exc.status_code} {exc}") from exc
            raise ModelRequestRejected(f"model request rejected (HTTP {exc.status_code}): {exc}") from exc
        except (openai.APITimeoutError, openai.APIConnectionError) as exc:
            raise ModelUnavailable(
                f"model endpoint unreachable after {self.max_attempts} attempts: {type(exc).__name__}: {exc}") from exc
        return response_from_body(raw, (time.perf_counter() - started) * 1000)

    async def _send(self, request: ModelRequest) -> dict[str, Any]:
        # The SDK's generic POST (its documented way to reach any path) rather than `client.chat.completions`:
        # same auth, headers and typed errors, but the first `client.chat` imports every resource module of the
        # SDK (about half a second), and the body is already the wire format, kept raw for traces.
        response = await self.client.post("/chat/completions", body=request.body(), cast_to=httpx.Response)
        return response.json()
