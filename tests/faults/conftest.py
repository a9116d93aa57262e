"""Fixtures of the provider-fault suite: a real local HTTP server for hangs and trickles."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator

import httpx
import openai
import pytest

from pagemind.runtime.model.client import HTTP_CLIENTS, OpenAIModelClient
from pagemind.runtime.model.pool import import_model_stack
from pagemind.runtime.model.posters import close_poster
from tests.faults.server import FaultServer


@pytest.fixture
def fault_server() -> Iterator[FaultServer]:
    """A local OpenAI-compatible server with an empty script (`fault_server.add(...)` queues behaviours)."""
    with FaultServer() as server:
        yield server


async def no_sleep(seconds: float) -> None:
    pass


@pytest.fixture(params=HTTP_CLIENTS)
async def real_client(request) -> AsyncIterator[Callable[..., OpenAIModelClient]]:
    """Makes model clients on each HTTP client the runtime posts with (httpx, aiohttp: the daemon's), against a
    real server; closes what they opened. httpx's own read timeout is long here, so only the per-attempt
    deadline can end a trickle."""
    made: list[openai.AsyncOpenAI] = []
    import_model_stack(request.param)  # as `serve` does: not inside the first attempt's request timeout

    def make(url: str, request_timeout_s: float, max_attempts: int = 2) -> OpenAIModelClient:
        sdk = openai.AsyncOpenAI(api_key="k", base_url=url, max_retries=0, timeout=httpx.Timeout(30.0))
        made.append(sdk)
        return OpenAIModelClient(
            sdk, max_attempts=max_attempts, sleep=no_sleep, request_timeout_s=request_timeout_s, http=request.param
        )

    yield make
    for sdk in made:
        await close_poster(sdk)
        await sdk.close()
