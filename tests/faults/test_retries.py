"""429s, 5xx, repeated context overflows and the turn deadline's hold on retries, over respx; backoff sleeps are
recorded, not slept, and a controllable clock stands in for time (issue 10, items 3 and 4)."""

from __future__ import annotations

import httpx
import openai
import pytest

from pagemind.runtime.model.client import (
    ContextLengthExceeded,
    ModelDeadlineExceeded,
    ModelRequest,
    ModelUnavailable,
    OpenAIModelClient,
    turn_deadline,
)
from pagemind.runtime.testing.endpoint import BASE_URL, TEST_API_KEY, http_error
from pagemind.runtime.testing.responses import reply_body

REQUEST = ModelRequest("m", [{"role": "user", "content": "hi"}], [], 0.5, 100)


class Clock:
    """Seconds that move only when the client sleeps (its backoff), so a deadline is reached without waiting."""

    def __init__(self) -> None:
        self.now, self.sleeps = 0.0, []

    def __call__(self) -> float:
        return self.now

    async def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def client_with(clock: Clock, max_attempts: int = 10) -> OpenAIModelClient:
    sdk = openai.AsyncOpenAI(api_key=TEST_API_KEY, base_url=BASE_URL, max_retries=0)
    return OpenAIModelClient(sdk, max_attempts=max_attempts, sleep=clock.sleep)


@pytest.mark.parametrize("headers,slept", [({"retry-after": "7"}, 7.0), ({"retry-after-ms": "250"}, 0.25)])
async def test_429_with_retry_after_waits_what_the_server_asks(scripted_openai, headers, slept):
    scripted_openai.add(http_error(429, "slow down", headers=headers), reply_body("ok"))
    assert (await scripted_openai.client().complete(REQUEST)).content == "ok"
    assert scripted_openai.sleeps == [slept]


async def test_429_without_retry_after_backs_off_with_growing_jitter(scripted_openai):
    scripted_openai.add(*[http_error(429, "slow down")] * 3, reply_body("ok"))
    assert (await scripted_openai.client().complete(REQUEST)).content == "ok"
    assert len(scripted_openai.sleeps) == 3
    assert all(0 <= s <= cap for s, cap in zip(scripted_openai.sleeps, (0.5, 1.0, 2.0)))


async def test_429_every_time_is_model_unavailable_after_the_attempts(scripted_openai):
    scripted_openai.add(*[http_error(429, "rate limited")] * 3)
    with pytest.raises(ModelUnavailable, match="failed 3 times; last: HTTP 429"):
        await scripted_openai.client(max_attempts=3).complete(REQUEST)
    assert len(scripted_openai.requests) == 3


@pytest.mark.parametrize("status", [500, 502, 503, 504])
async def test_5xx_is_retried(scripted_openai, status):
    scripted_openai.add(http_error(status, "down"), reply_body("ok"))
    assert (await scripted_openai.client().complete(REQUEST)).content == "ok"
    assert len(scripted_openai.requests) == 2


async def test_a_retry_after_past_the_turn_deadline_ends_the_retries_at_once(scripted_openai):
    scripted_openai.add(http_error(429, "come back in an hour", headers={"retry-after": "3600"}))
    clock = Clock()  # the wait is capped at 30 s, still past a 20 s turn
    async with turn_deadline(20, clock=clock):
        with pytest.raises(ModelDeadlineExceeded, match=r"turn_deadline_s = 20 s\).*1 attempt, last: .*hour"):
            await client_with(clock).complete(REQUEST)
    assert clock.sleeps == [] and len(scripted_openai.requests) == 1


async def test_retries_stop_before_the_turn_deadline_would_pass(scripted_openai):
    """5xx with Retry-After: 3 and a 10 s turn: attempts at 0, 3, 6 and 9 s; a fifth could not start in time."""
    scripted_openai.add(*[http_error(503, "busy", headers={"retry-after": "3"})] * 4)
    clock = Clock()
    async with turn_deadline(10, clock=clock):
        with pytest.raises(ModelDeadlineExceeded, match="gave up after 4 attempts"):
            await client_with(clock).complete(REQUEST)
    assert clock.sleeps == [3.0, 3.0, 3.0]


async def test_a_non_retryable_error_is_not_reported_as_a_deadline(scripted_openai):
    scripted_openai.add(http_error(401, "bad key"))
    clock = Clock()
    async with turn_deadline(1, clock=clock):
        with pytest.raises(Exception) as caught:
            await client_with(clock).complete(REQUEST)
    assert type(caught.value).__name__ == "ModelRequestRejected" and "HTTP 401" in str(caught.value)


async def test_context_length_exceeded_is_never_retried_by_the_client(scripted_openai):
    scripted_openai.add(http_error(400, "maximum context length is 8192 tokens", code="context_length_exceeded"))
    with pytest.raises(ContextLengthExceeded):
        await scripted_openai.client().complete(REQUEST)
    assert len(scripted_openai.requests) == 1


async def test_a_transport_timeout_every_time_is_a_deadline_error(scripted_openai):
    scripted_openai.add(*[httpx.ReadTimeout("slow")] * 2)
    with pytest.raises(ModelDeadlineExceeded, match="request_timeout_s = 60 s in 2 attempts"):
        await scripted_openai.client(max_attempts=2).complete(REQUEST)
