"""One SDK client, hence one keep-alive connection pool, per model endpoint and event loop, shared by every agent.

A thousand agents talking to one server should hold one pool, not a thousand (each `openai.AsyncOpenAI` owns an
`httpx.AsyncClient` and its connections). An httpx pool is bound to the event loop that first used it: its
connections and locks belong to that loop, and using it from another one fails or hangs. So clients are kept
per running loop: when a loop is closed (`asyncio.run` ends), its clients are dropped as the next loop gets its
own.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import httpx

if TYPE_CHECKING:
    import openai


@dataclass(frozen=True)
class Endpoint:
    """What makes two clients interchangeable: where they post, with which key, under which timeouts."""

    base_url: str | None
    api_key: str = field(repr=False)  # never in a log line or a traceback
    timeout_s: float
    connect_timeout_s: float
    http: str = "httpx"  # the HTTP client the calls go out on: "httpx" or "aiohttp" (`model_post.poster_for`)

    def build(self) -> openai.AsyncOpenAI:
        """A new SDK client for this endpoint (no SDK retries: the model client retries with tenacity)."""
        import openai

        timeout = httpx.Timeout(self.timeout_s, connect=self.connect_timeout_s)
        # The SDK's public default client (its limits and redirects), given explicitly: the one it builds itself
        # schedules its own closing on whatever loop runs when it is collected, which fails for a pool whose loop
        # has closed (see `shared_client`).
        return openai.AsyncOpenAI(
            api_key=self.api_key,
            base_url=self.base_url,
            max_retries=0,
            timeout=timeout,
            http_client=openai.DefaultAsyncHttpxClient(timeout=timeout),
        )


_CLIENTS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[Endpoint, openai.AsyncOpenAI]] = (
    weakref.WeakKeyDictionary()
)
_LOCK = threading.Lock()  # loops may run in several threads (a daemon's workers, tests' threads)


def shared_client(endpoint: Endpoint) -> openai.AsyncOpenAI:
    """The running loop's client for `endpoint`, built on first use. Outside a running loop (a client inspected
    from synchronous code) a fresh, unshared client: no loop exists yet to bind a shared one to."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return endpoint.build()
    with _LOCK:
        clients = _CLIENTS.get(loop)
        if clients is None:
            # A client with open connections holds its loop through their transports, so a closed loop's entry
            # would never be collected: drop those here (their sockets close as the clients are collected).
            for closed in [other for other in _CLIENTS if other.is_closed()]:
                del _CLIENTS[closed]
            clients = _CLIENTS[loop] = {}
        client = clients.get(endpoint)
        if client is None:
            client = clients[endpoint] = endpoint.build()
        return client


def take_loop_clients() -> list[openai.AsyncOpenAI]:
    """The running loop's shared clients, forgotten here (the caller closes them: a daemon's stop)."""
    loop = asyncio.get_running_loop()
    with _LOCK:
        clients = _CLIENTS.pop(loop, {})
    return list(clients.values())


def import_model_stack(http: str = "httpx") -> None:
    """Import the SDK and its HTTP stack now (`http`: aiohttp too, when the calls go out on it). The CLI imports
    them at the first model call, to start fast; a daemon calls this at start instead, so that its first turn does
    not wait for ~800 modules (0.7 s of CPU here; aiohttp 0.13 s more), all of it inside that call's
    `request_timeout_s`, and the collector's start-up freeze (`scheduler.gc_tuning`) covers them."""
    import httpcore  # noqa: F401 (loaded now, not in the first call: httpx imports it only when a client is built)
    import openai  # noqa: F401 (loaded now, not in the first call)

    if http == "aiohttp":
        import aiohttp  # noqa: F401 (loaded now, not in the first call)


def pooled_clients() -> int:
    """How many shared clients (pools) exist across live loops (tests and benchmarks read it)."""
    with _LOCK:
        return sum(len(clients) for clients in _CLIENTS.values())
