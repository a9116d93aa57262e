"""Calling the model: one interface, an OpenAI-compatible implementation with tenacity retries, typed errors.

`openai` is imported when a client is built, not with this module: everything that only speaks in requests and
responses (traces, replay, the monitor, the CLI's inspection commands) is spared its half-second import.
"""

from __future__ import annotations

import asyncio
import contextvars
import dataclasses
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import structlog
from tenacity import AsyncRetrying, RetryCallState, retry_if_exception
from tenacity.wait import wait_base

from pagemind.runtime.model.pool import Endpoint, shared_client, take_loop_clients
from pagemind.runtime.model.posters import close_poster, poster_for

# Re-exported (`X as X`): the request, the response and the errors live in those modules; callers take them from here.
from pagemind.runtime.model.request import ModelRequest as ModelRequest
from pagemind.runtime.model.response import ModelBadResponse as ModelBadResponse
from pagemind.runtime.model.response import ModelError as ModelError
from pagemind.runtime.model.response import ModelResponse as ModelResponse
from pagemind.runtime.model.response import one_line, response_from_http
from pagemind.runtime.model.response import response_from_body as response_from_body
from pagemind.runtime.model.stream import STREAM_OPTIONS, DeltaSink, post_streamed, refuses_streaming
from pagemind.runtime.process.settings import Settings, SettingsError
from pagemind.runtime.spec.agent import ModelSpec

if TYPE_CHECKING:
    import openai

log = structlog.get_logger("pagemind.model")


class NoModelConfigured(ModelError):
    """No endpoint or key is configured; the message says how to configure one."""


class ModelUnavailable(ModelError):
    """Retries ran out (429, 5xx, timeouts, connection errors)."""


class ModelRequestRejected(ModelError):
    """The provider refused the request (a 4xx other than 429); retrying would not help."""


class ContextLengthExceeded(ModelError):
    """The prompt is larger than the model's window; the pressure monitor flushes and retries once."""


class ModelDeadlineExceeded(ModelUnavailable):
    """An attempt ran past `model.request_timeout_s` every time, or the turn past `model.turn_deadline_s`."""


@dataclass(frozen=True)
class TurnDeadline:
    """When the current turn must end, on `clock`'s scale, and the configured length."""

    at: float
    seconds: float
    clock: Callable[[], float] = time.monotonic

    def remaining(self) -> float:
        """Seconds left (negative once past)."""
        return self.at - self.clock()


_TURN_DEADLINE: contextvars.ContextVar[TurnDeadline | None] = contextvars.ContextVar("turn_deadline", default=None)


@asynccontextmanager
async def turn_deadline(seconds: float, clock: Callable[[], float] = time.monotonic) -> AsyncIterator[TurnDeadline]:
    """Bound everything inside (model attempts, retries, backoff, tool calls) to `seconds`; raises
    ModelDeadlineExceeded when it runs out. Model clients read it so that no retry is started that cannot finish
    (`clock` lets a test move that reading; the bound itself is on the event loop's clock)."""
    deadline = TurnDeadline(clock() + seconds, seconds, clock)
    token = _TURN_DEADLINE.set(deadline)
    scope = asyncio.timeout(seconds)
    try:
        async with scope:
            yield deadline
    except TimeoutError as exc:
        if not scope.expired():
            raise
        raise ModelDeadlineExceeded(f"the turn ran past its deadline (model.turn_deadline_s = {seconds:g} s)") from exc
    finally:
        _TURN_DEADLINE.reset(token)


def current_turn_deadline() -> TurnDeadline | None:
    """The deadline of the turn this task is running, if any."""
    return _TURN_DEADLINE.get()


HTTP_CLIENTS = ("httpx", "aiohttp")  # PAGEMIND_HTTP_CLIENT: what model calls go out on (httpx unless set)


async def close_shared_clients() -> None:
    """Close the running loop's shared SDK clients, their pools and their posters' (a daemon's stop)."""
    for client in take_loop_clients():
        await close_poster(client)
        await client.close()


class ModelClient(Protocol):
    """Anything that answers a ModelRequest: the OpenAI client, a scripted model, a trace replayer."""

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Answer one request."""
        ...


@runtime_checkable
class StreamingModelClient(ModelClient, Protocol):
    """A model client that can also stream: the same validated response, its text handed to `sink` as it arrives."""

    async def stream(self, request: ModelRequest, sink: DeltaSink) -> ModelResponse:
        """Answer one request with `stream: true`; `sink` hears the fragments (and `discard` for a failed attempt)."""
        ...


class _AttemptTimedOut(Exception):
    """One attempt ran past `request_timeout_s` (a hang, or a body trickled in byte by byte)."""


def _retryable(exc: BaseException) -> bool:
    import openai

    if isinstance(exc, ModelBadResponse):
        return exc.transient
    if isinstance(exc, (_AttemptTimedOut, openai.APITimeoutError, openai.APIConnectionError)):
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
    inner = body.get("error")
    code = code or body.get("code") or (inner.get("code") if isinstance(inner, dict) else None)
    return code == "context_length_exceeded" or "maximum context length" in str(exc).lower()


def _log_retry(state: RetryCallState) -> None:
    exc = state.outcome.exception() if state.outcome else None
    log.warning(
        "model_retry",
        attempt=state.attempt_number,
        error=type(exc).__name__,
        status=getattr(exc, "status_code", None),
        wait_s=round(state.next_action.sleep, 3) if state.next_action else None,
    )


def missing_endpoint_message(api_key_env: str) -> str:
    """How to configure a model endpoint, for commands that need one."""
    return (
        f"No model endpoint is configured. Set {api_key_env} (for OpenAI), or OPENAI_BASE_URL for any "
        "OpenAI-compatible server (vLLM, Ollama, llama.cpp: e.g. OPENAI_BASE_URL=http://127.0.0.1:8080/v1), "
        "or model.base_url in the agent's YAML."
    )


class _StopRetrying:
    """Tenacity's stop: after `max_attempts`, or when the next attempt could not start before the turn's deadline
    (the wait included, so a Retry-After past the deadline ends the retries at once); remembers which."""

    def __init__(self, max_attempts: int, deadline: TurnDeadline | None):
        self.max_attempts, self.deadline = max_attempts, deadline
        self.attempts, self.deadline_hit = 0, False

    def __call__(self, state: RetryCallState) -> bool:
        self.attempts = state.attempt_number
        if self.deadline is not None and state.upcoming_sleep >= self.deadline.remaining():
            self.deadline_hit = True
            return True
        return state.attempt_number >= self.max_attempts


class OpenAIModelClient:
    """An OpenAI-compatible chat endpoint through `openai.AsyncOpenAI`; tenacity does the retrying.

    Each attempt is bounded as a whole by `request_timeout_s` (httpx's read timeout restarts with every byte, so
    a server trickling its answer would never time out), and inside a turn by what is left of `turn_deadline`."""

    def __init__(
        self,
        client: openai.AsyncOpenAI | Endpoint,
        max_attempts: int = 5,
        wait: wait_base | None = None,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        request_timeout_s: float = 60.0,
        http: str | None = None,
    ):
        self._client = client
        # What the calls go out on (`HTTP_CLIENTS`): given, else the endpoint's, else httpx.
        self.http = http or (client.http if isinstance(client, Endpoint) else "httpx")
        self.max_attempts = max_attempts
        self.wait = wait or wait_retry_after_or_jitter()
        self.sleep = sleep
        self.request_timeout_s = request_timeout_s
        self.streams = True  # False once the server refused a streamed request

    @property
    def client(self) -> openai.AsyncOpenAI:
        """The SDK client: the one given, or the process's shared one for this endpoint in the running loop."""
        return shared_client(self._client) if isinstance(self._client, Endpoint) else self._client

    @classmethod
    def from_spec(cls, spec: ModelSpec, environ: dict[str, str] | None = None, **kwargs: Any) -> OpenAIModelClient:
        """A client for the spec's endpoint: base URL from the spec or OPENAI_BASE_URL, key from `api_key_env`.
        Clients of one endpoint share one connection pool per event loop (`runtime.model.pool`)."""
        base_url = spec.base_url or Settings.read("openai_base_url", environ)
        api_key = Settings.api_key(spec.api_key_env, environ)
        if not base_url and not api_key:
            raise NoModelConfigured(missing_endpoint_message(spec.api_key_env))
        timeout = spec.request_timeout_s
        http = Settings.read("http_client", environ) or "httpx"
        if http not in HTTP_CLIENTS:
            raise SettingsError(
                f"PAGEMIND_HTTP_CLIENT={http!r} names no HTTP client: use one of {', '.join(HTTP_CLIENTS)}"
            )
        # Local servers take any key; the SDK insists on one.
        endpoint = Endpoint(base_url, api_key or "not-needed", timeout, min(10.0, timeout), http)
        kwargs.setdefault("request_timeout_s", timeout)
        return cls(endpoint, **kwargs)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """Send the request, retrying transient failures within the turn's deadline; raise a typed ModelError
        otherwise (nothing unvalidated ever comes back)."""
        return await self._call(request, None)

    async def stream(self, request: ModelRequest, sink: DeltaSink) -> ModelResponse:
        """As `complete` with `stream: true`: the same validated response; `sink` hears the text as it arrives, and
        `discard` when an attempt fails (a stream cut mid-way is retried whole). `request_timeout_s` bounds one
        attempt's whole stream. A server that refuses `stream` (a 4xx naming it) gets plain requests from then on."""
        streaming = self.streams
        try:
            return await self._call(request, sink if streaming else None)
        except ModelRequestRejected as exc:
            if not streaming or not refuses_streaming(exc):
                raise
            self.streams = False
            log.warning("model_stream_refused", error=one_line(str(exc)))
            return await self._call(request, None)

    async def _call(self, request: ModelRequest, sink: DeltaSink | None) -> ModelResponse:
        deadline = current_turn_deadline()
        stop = _StopRetrying(self.max_attempts, deadline)
        retrying = AsyncRetrying(
            stop=stop,
            wait=self.wait,
            retry=retry_if_exception(_retryable),
            sleep=self.sleep,
            before_sleep=_log_retry,
            reraise=True,
        )
        started = time.perf_counter()
        try:
            response: ModelResponse = await retrying(self._attempt, request, deadline, sink)
        except Exception as exc:
            typed = self._typed_error(exc, stop)
            if typed is exc:
                raise
            if typed is None:
                raise  # not a failure of the endpoint: a bug, let it show
            raise typed from exc
        return dataclasses.replace(response, latency_ms=(time.perf_counter() - started) * 1000)

    async def _attempt(
        self, request: ModelRequest, deadline: TurnDeadline | None, sink: DeltaSink | None
    ) -> ModelResponse:
        try:
            return await self._bounded(request, deadline, sink)
        except BaseException as exc:  # what this attempt streamed is void, whether or not another follows
            if sink is not None:
                sink.discard(f"the model call failed ({type(exc).__name__}); its partial reply is discarded")
            raise

    async def _bounded(
        self, request: ModelRequest, deadline: TurnDeadline | None, sink: DeltaSink | None
    ) -> ModelResponse:
        limit = self.request_timeout_s
        if deadline is not None:
            limit = min(limit, deadline.remaining())
            if limit <= 0:
                raise ModelDeadlineExceeded(_turn_deadline_message(deadline))
        scope = asyncio.timeout(limit)
        try:
            async with scope:
                # Not `client.chat.completions` (its first use imports every resource module of the SDK, and it
                # transforms every field): the body is already the wire format, joined from JSON encoded once per
                # message, posted on the SDK client's pool with its headers and typed errors (`model_post`).
                poster = poster_for(self.client, self.http)
                if sink is not None:
                    return await post_streamed(poster, request.encoded(STREAM_OPTIONS), sink)
                response = await poster.post(request.encoded())
        except TimeoutError:
            if not scope.expired():
                raise
            if limit < self.request_timeout_s:  # cut short by the turn's deadline: no retry can help
                raise ModelDeadlineExceeded(_turn_deadline_message(deadline)) from None
            raise _AttemptTimedOut(f"no complete answer in {limit:g} s") from None
        return response_from_http(response)

    def _typed_error(self, exc: Exception, stop: _StopRetrying) -> ModelError | None:
        """The ModelError to raise for the last attempt's failure (`exc` itself if it is one already)."""
        import openai

        attempts = f"{stop.attempts} attempt{'s' if stop.attempts != 1 else ''}"
        if stop.deadline_hit and _retryable(exc):
            return ModelDeadlineExceeded(
                f"{_turn_deadline_message(stop.deadline)}; gave up after {attempts}, last: {_describe(exc)}"
            )
        if isinstance(exc, ModelBadResponse):
            if exc.transient:
                return ModelBadResponse(f"no usable response from the model endpoint in {attempts}; last: {exc}")
            return ModelBadResponse(f"unusable response from the model endpoint: {exc}")
        if isinstance(exc, ModelError):
            return exc
        if isinstance(exc, (_AttemptTimedOut, openai.APITimeoutError)):  # httpx's timeouts are request_timeout_s too
            return ModelDeadlineExceeded(
                f"model endpoint gave no complete answer within request_timeout_s = "
                f"{self.request_timeout_s:g} s in {attempts}; last: {_describe(exc)}"
            )
        if isinstance(exc, openai.BadRequestError):
            if _is_context_length(exc):
                return ContextLengthExceeded(one_line(str(exc), 500))
            return ModelRequestRejected(f"model request rejected (HTTP 400): {_describe(exc)}")
        if isinstance(exc, openai.APIStatusError):
            if _retryable(exc):
                return ModelUnavailable(
                    f"model endpoint failed {stop.attempts} times; last: HTTP {exc.status_code} {_describe(exc)}"
                )
            return ModelRequestRejected(f"model request rejected (HTTP {exc.status_code}): {_describe(exc)}")
        if isinstance(exc, openai.APIConnectionError):
            return ModelUnavailable(f"model endpoint unreachable after {attempts}: {_describe(exc)}")
        return None


def _turn_deadline_message(deadline: TurnDeadline | None) -> str:
    seconds = deadline.seconds if deadline else 0
    return f"the turn ran past its deadline (model.turn_deadline_s = {seconds:g} s)"


def _describe(exc: BaseException) -> str:
    import openai

    if isinstance(exc, (openai.APITimeoutError, openai.APIConnectionError, _AttemptTimedOut)):
        return one_line(f"{type(exc).__name__}: {exc}")
    return one_line(str(exc))
