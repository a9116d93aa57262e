"""POSTing a prepared chat-completions body on an SDK client's own connection pool, without the SDK's per-call
request machinery.

The body is already the wire format (`ModelRequest.encoded`) and tenacity does the retrying, so of `client.post`
only three things are wanted: the SDK's headers (auth, user agent, platform), its httpx client (the keep-alive
pool) and its typed errors. Its generic `post` rebuilds the rest on every call: request options as a pydantic
model, copied twice, the headers merged and validated again, the platform looked up, a retry loop of its own
(with no retries) and the response dispatched on `cast_to`. `LeanPost` takes the headers once per client, from
the SDK itself, and then per call builds the request with httpx's public `build_request` (its cookies and default
headers merged as before), sends it with `send`, and raises what the SDK would raise: `APITimeoutError`,
`APIConnectionError`, or the `APIStatusError` subclass made by the SDK's own status-error factory.

Only a plain `openai.AsyncOpenAI` on an httpx client qualifies (what `model_pool.Endpoint` builds, and what
callers usually pass). A subclass (Azure rewrites the URL per deployment), a provider runtime, workload identity,
a refreshed API key, custom auth or an idempotency header need the SDK's per-call hooks, so such a client is
posted to through `client.post` exactly as before (`SdkPost`).

A `LeanPost` spreads its requests over `SHARDS` httpx clients (the SDK's own and copies of it with its settings),
round robin. httpcore's pool looks at every one of its connections twice per request (whether each is closed,
expired — a socket poll per idle connection — or free), so its CPU per request grows with the connections in
flight: with 64 model calls at once that scan was ~10 % of a daemon's CPU. Each shard holds an eighth of them.
Only a client on httpx's default transport is copied (nothing to copy a custom transport, proxies or auth from);
any other posts on its own pool alone.
"""

from __future__ import annotations

import asyncio
import itertools
from typing import TYPE_CHECKING, Any, Protocol

import httpx

if TYPE_CHECKING:
    import openai

PATH = "/chat/completions"
SHARDS = 8  # httpx clients per SDK client (see the module's docstring)


class Poster(Protocol):
    """Posts a prepared JSON body to the endpoint's chat completions."""

    async def post(self, content: bytes, *, stream: bool = False) -> httpx.Response:
        """The 2xx response (its body read unless `stream`); raises the SDK's typed errors otherwise."""
        ...


class SdkPost:
    """The SDK's generic `post`, for clients that need its per-call hooks."""

    def __init__(self, client: "openai.AsyncOpenAI"):
        self.client = client

    async def post(self, content: bytes, *, stream: bool = False) -> httpx.Response:
        """See `Poster.post`."""
        return await self.client.post(PATH, content=content, cast_to=httpx.Response, stream=stream)


class LeanPost:
    """The POST of `client.post(PATH, content=…, cast_to=httpx.Response)`, with the headers taken once."""

    def __init__(self, client: "openai.AsyncOpenAI"):
        self.client = client
        self.url = client._prepare_url(PATH)
        self.headers: httpx.Headers | None = None
        self._shards = itertools.cycle(shards_of(client._client))
        # As the SDK: a host name with "_" is not a valid SNI name (https://github.com/encode/httpx/discussions/2880)
        self.extensions = {"sni_hostname": self.url.host.replace("_", "-")} if "_" in self.url.host else None

    async def post(self, content: bytes, *, stream: bool = False) -> httpx.Response:
        """See `Poster.post`."""
        import openai

        if self.headers is None:
            # The platform headers may read files on first use (then cached): looked up off the event loop, as
            # the SDK does; the rest on it (one header names the running async library).
            await asyncio.to_thread(self.client.platform_headers)
            self.headers = sdk_headers(self.client)
        http = next(self._shards)
        request = http.build_request("POST", self.url, headers=self.headers, content=content,
                                     timeout=self.client.timeout, extensions=self.extensions)
        try:
            response = await http.send(request, stream=stream)
        except httpx.TimeoutException as exc:
            raise openai.APITimeoutError(request=request) from exc
        except openai.OpenAIError:
            raise
        except Exception as exc:  # as the SDK: any failure to get a response is a connection error
            raise openai.APIConnectionError(request=request) from exc
        if not response.is_success:
            try:
                if not response.is_closed:  # a streamed request's error body, read for the error's message
                    await response.aread()
            finally:
                await response.aclose()
            raise self.client._make_status_error_from_response(response) from None
        return response


def shards_of(http: httpx.AsyncClient) -> list[httpx.AsyncClient]:
    """`http` and `SHARDS - 1` new clients with its settings; `http` alone unless it is on the default transport."""
    try:
        transport = http._transport
        pool = transport._pool  # type: ignore[attr-defined]
        copyable = (type(transport) is httpx.AsyncHTTPTransport and not http._mounts and http.auth is None
                    and not any(http.event_hooks.values()) and not http.params and not http.cookies
                    and pool._uds is None and pool._local_address is None and pool._socket_options is None
                    and pool._retries == 0)
        if not copyable:
            return [http]
        limits = httpx.Limits(max_connections=pool._max_connections,
                              max_keepalive_connections=pool._max_keepalive_connections,
                              keepalive_expiry=pool._keepalive_expiry)
        return [http, *(httpx.AsyncClient(
            verify=pool._ssl_context, http1=pool._http1, http2=pool._http2, limits=limits, timeout=http.timeout,
            headers=http.headers, follow_redirects=http.follow_redirects, max_redirects=http.max_redirects,
            trust_env=False) for _ in range(SHARDS - 1))]
    except (AttributeError, ImportError):  # another httpx or httpcore: its own pool alone
        return [http]


def sdk_headers(client: "openai.AsyncOpenAI") -> httpx.Headers:
    """The headers the SDK's `post` sends, built by the SDK (auth, defaults, its retry count and read timeout)."""
    from openai._models import FinalRequestOptions

    return client._build_headers(FinalRequestOptions.construct(method="post", url=PATH), retries_taken=0)


def is_plain(client: Any) -> bool:
    """Whether `client` needs none of the SDK's per-call hooks (see the module's docstring)."""
    import openai

    try:
        from openai._models import FinalRequestOptions  # noqa: F401 (what `sdk_headers` builds the headers from)

        uses = ("_build_headers", "_prepare_url", "_make_status_error_from_response", "platform_headers")
        return (type(client) is openai.AsyncOpenAI and isinstance(client._client, httpx.AsyncClient)
                and all(callable(getattr(client, name, None)) for name in uses)
                and getattr(client, "_provider_runtime", None) is None
                and getattr(client, "_workload_identity_auth", None) is None
                and getattr(client, "_api_key_provider", None) is None
                and client.custom_auth is None and client._idempotency_header is None and not client.default_query)
    except (AttributeError, ImportError):  # another SDK version: keep to its public post
        return False


# A client's poster hangs off the client itself, not off a dictionary keyed by it: the poster refers to its client,
# so a dictionary's value would keep its own key alive, and with it the client's pools and their event loop, for
# ever. As an attribute the two form a cycle, which the collector frees with the client.
_ATTRIBUTE = "_pagemind_poster"


def poster_for(client: "openai.AsyncOpenAI") -> Poster:
    """The poster of `client`, made once per client (so its headers are built once for every agent sharing it)."""
    poster = getattr(client, _ATTRIBUTE, None)
    if poster is None:
        poster = LeanPost(client) if is_plain(client) else SdkPost(client)
        setattr(client, _ATTRIBUTE, poster)
    return poster
