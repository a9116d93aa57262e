"""One SDK client, hence one keep-alive connection pool, per model endpoint and event loop, shared by every agent.

A thousand agents talking to one server should hold one pool, not a thousand (each `openai.AsyncOpenAI` owns an
`httpx.AsyncClient` and its connections). An httpx pool is bound to the event loop that first used it: its
connections and locks belong to that loop, and using it from another one fails or hangs. So clients are kept
per running loop, weakly: when a loop is closed and collected (`asyncio.run` ends), its clients go with it, and
the next loop gets fresh ones.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING

import httpx

if TYPE_CHECKING:
    import openai


@dataclass(frozen=True)
class Endpoint:
    """What makes two clients interchangeable: where they post, with which key, under which timeouts."""

    base_url: str | None
    api_key: str
    timeout_s: float
    connect_timeout_s: float

    def build(self) -> "openai.AsyncOpenAI":
        """A new SDK client for this endpoint (no SDK retries: the model client retries with tenacity)."""
        import openai

        return openai.AsyncOpenAI(api_key=self.api_key, base_url=self.base_url, max_retries=0,
                                  timeout=httpx.Timeout(self.timeout_s, connect=self.connect_timeout_s))


_CLIENTS: "weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[Endpoint, openai.AsyncOpenAI]]" = (
    weakref.WeakKeyDictionary())
_LOCK = threading.Lock()  # loops may run in several threads (a daemon's workers, tests' threads)


def shared_client(endpoint: Endpoint) -> "openai.AsyncOpenAI":
    """The running loop's client for `endpoint`, built on first use. Outside a running loop (a client inspected
    from synchronous code) a fresh, unshared client: no loop exists yet to bind a shared one to."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return endpoint.build()
    with _LOCK:
        clients = _CLIENTS.get(loop)
        if clients is None:
            clients = _CLIENTS[loop] = {}
        client = clients.get(endpoint)
        if client is None:
            client = clients[endpoint] = endpoint.build()
        return client


def pooled_clients() -> int:
    """How many shared clients (pools) exist across live loops (tests and benchmarks read it)."""
    with _LOCK:
        return sum(len(clients) for clients in _CLIENTS.values())
