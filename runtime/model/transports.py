"""POSTing a prepared chat-completions body on an SDK client's own connection pool, without the SDK's per-call
request machinery.

The body is already the wire format (`ModelRequest.encoded`) and tenacity does the retrying, so of `client.post`
only three things are wanted: the SDK's headers (auth, user agent, platform), its httpx client (the keep-alive
pool) and its typed errors. Its generic `post` rebuilds the rest on every call: request options as a pydantic
model, copied twice, the headers merged and validated again, the platform looked up, a retry loop of its own
(with no retries) and the response dispatched on `cast_to`. `LeanPost` takes the headers once per client, from
the SDK itself, and then per call builds the request with httpx's public `build_request` (its cookies and default
headers merged as before), sends it (see below), and raises what the SDK would raise: `APITimeoutError`,
`APIConnectionError`, or the `APIStatusError` subclass made by the SDK's own status-error factory.

Only a plain `openai.AsyncOpenAI` on an httpx client qualifies (what `model_pool.Endpoint` builds, and what
callers usually pass). A subclass (Azure rewrites the URL per deployment), a provider runtime, workload identity,
a refreshed API key, custom auth or an idempotency header need the SDK's per-call hooks, so such a client is
posted to through `client.post` exactly as before (`SdkPost`).

A `LeanPost` spreads its requests over up to `SHARDS` httpx clients: the SDK's own, and copies of it with its
settings made as they are needed. httpcore's pool looks at every one of its connections twice per request
(whether each is closed, expired — a socket poll per idle connection — or free), so its CPU per request grows with
the connections it holds: with 64 model calls in flight the POST cost 5.45 ms of CPU a call on one pool, 2.19 on 8
and 1.42 on 32 (bench/RESULTS.md). Each request goes to the client with the fewest requests in flight, the first
among equals: k calls at once use k clients, and calls one at a time all go to the first, whose connection stays
warm (taken in turn, each client's connection sat idle past its keep-alive expiry, 5 s, whenever fewer calls than
clients came in that time, and each such call paid a new connection and TLS handshake). A streamed response
counts as in flight until `post` returns it.
Only a client on httpx's default transport is copied (nothing to copy a custom transport, proxies or auth from);
any other posts on its own pool alone.

On such plain clients the request goes to the transport itself, not through `AsyncClient.send`: with no auth, no
event hooks and no proxy mounts, `send`'s auth and redirect generators, its stream wrapper and the cookie jar's
parse of every response (a urllib request built per call) do nothing but cost ~0.25 ms of CPU a request (×0.85).
What they would do is kept: a response that sets cookies is given to the SDK's client's jar, whose cookies every
shard sends, and a redirect is followed by that client (`send` of the request it builds from the answer), as the
SDK's post would.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING, Any, Protocol

import httpx

if TYPE_CHECKING:
    import openai

PATH = "/chat/completions"
SHARDS = 32  # httpx clients per SDK client at most (see the module's docstring)


class Poster(Protocol):
    """Posts a prepared JSON body to the endpoint's chat completions."""

    async def post(self, content: bytes, *, stream: bool = False) -> httpx.Response:
        """The 2xx response (its body read unless `stream`); raises the SDK's typed errors otherwise."""
        ...


class SdkPost:
    """The SDK's generic `post`, for clients that need its per-call hooks."""

    def __init__(self, client: openai.AsyncOpenAI):
        self.client = client

    async def post(self, content: bytes, *, stream: bool = False) -> httpx.Response:
        """See `Poster.post`."""
        return await self.client.post(PATH, content=content, cast_to=httpx.Response, stream=stream)


class _DirectPost:
    """What the direct posters share: the SDK's headers, built once per client, and the SDK's status errors."""

    def __init__(self, client: openai.AsyncOpenAI):
        self.client = client
        self.url = client._prepare_url(PATH)
        self.headers: httpx.Headers | None = None
        self.own = client._client  # the SDK's httpx client: its cookie jar is every shard's, as for the SDK's post

    async def _headers(self) -> httpx.Headers:
        if self.headers is None:
            # The platform headers may read files on first use (then cached): looked up off the event loop, as
            # the SDK does; the rest on it (one header names the running async library).
            await asyncio.to_thread(self.client.platform_headers)
            self.headers = sdk_headers(self.client)
        return self.headers

    async def _checked(self, response: httpx.Response) -> httpx.Response:
        """`response` if its status is 2xx; else the SDK's status error, raised with the body read."""
        if not response.is_success:
            try:
                if not response.is_closed:  # a streamed request's error body, read for the error's message
                    await response.aread()
            finally:
                await response.aclose()
            raise self.client._make_status_error_from_response(response) from None
        return response


class LeanPost(_DirectPost):
    """The POST of `client.post(PATH, content=…, cast_to=httpx.Response)`, with the headers taken once."""

    def __init__(self, client: openai.AsyncOpenAI):
        super().__init__(client)
        self.direct = plain_transport(self.own) is not None  # sent on the transport itself, and copied
        self._http: list[httpx.AsyncClient | None] = [self.own, *[None] * (SHARDS - 1 if self.direct else 0)]
        self._in_flight = [0] * len(self._http)
        # As the SDK: a host name with "_" is not a valid SNI name (https://github.com/encode/httpx/discussions/2880)
        self.extensions = {"sni_hostname": self.url.host.replace("_", "-")} if "_" in self.url.host else None

    async def post(self, content: bytes, *, stream: bool = False) -> httpx.Response:
        """See `Poster.post`."""
        import openai

        headers = await self._headers()
        shard = self._in_flight.index(min(self._in_flight))  # the least busy, the first among equals
        http = self._http[shard] or self._copy(shard)
        jar = self.own.cookies if http is not self.own and self.own.cookies else None
        request = http.build_request(
            "POST",
            self.url,
            headers=headers,
            content=content,
            cookies=jar,
            timeout=self.client.timeout,
            extensions=self.extensions,
        )
        self._in_flight[shard] += 1
        try:
            response = await (
                self._send_direct(http, request, stream) if self.direct else http.send(request, stream=stream)
            )
        except httpx.TimeoutException as exc:
            raise openai.APITimeoutError(request=request) from exc
        except openai.OpenAIError:
            raise
        except Exception as exc:  # as the SDK: any failure to get a response is a connection error
            raise openai.APIConnectionError(request=request) from exc
        finally:
            self._in_flight[shard] -= 1
        return await self._checked(response)

    async def aclose(self) -> None:
        """Close the copies' pools (the SDK's own client closes with the SDK client)."""
        for http in self._http[1:]:
            if http is not None:
                await http.aclose()

    def _copy(self, shard: int) -> httpx.AsyncClient:
        http = self._http[shard] = copy_of(self.own)  # made at the first call that finds the others busy
        return http

    async def _send_direct(self, http: httpx.AsyncClient, request: httpx.Request, stream: bool) -> httpx.Response:
        """`http.send(request, stream=stream)` on a plain client, through its transport (see the module's
        docstring); cookies go to the SDK's client's jar, and a redirect is followed by it."""
        response = await http._transport.handle_async_request(request)
        response.request = request
        if "set-cookie" in response.headers:
            self.own.cookies.extract_cookies(response)
        if response.is_redirect and self.own.follow_redirects:
            await response.aclose()
            return await self.own.send(self.own._build_redirect_request(request, response), stream=stream)
        if not stream:
            try:
                await response.aread()
            except BaseException:
                await response.aclose()
                raise
        return response


class AiohttpPost(_DirectPost):
    """`LeanPost`'s POST sent on an aiohttp session instead of httpx's pool (`PAGEMIND_HTTP_CLIENT=aiohttp`, the
    daemon's default): the request as the SDK's httpx client builds it (its headers and the SDK's, the URL), built
    once, then aiohttp, whose HTTP/1.1 and connection pool cost a third to a half of httpx's CPU per call
    (`bench/RESULTS.md`, "Daemon CPU per step, fifth pass"), and an `httpx.Response` back, as the other posters
    give. aiohttp follows redirects and keeps cookies
    itself; its errors become the SDK's (`APITimeoutError`, `APIConnectionError`), and while a streamed body is read,
    httpx's (`ReadTimeout`, `ReadError`), as `model_stream` expects. The session belongs to the event loop of the
    first call, as the SDK client does (`model_pool`); `aclose` ends it. aiohttp is imported here, at the first
    call: the SDK imports it in every process once `httpx-aiohttp` is installed (+12 MB, +0.13 s), so that package
    is not used."""

    def __init__(self, client: openai.AsyncOpenAI):
        super().__init__(client)
        self._session: Any = None
        self._proxy: str | None = None
        self._server_hostname = self.url.host.replace("_", "-") if "_" in self.url.host else None  # as LeanPost
        self._request: httpx.Request | None = None  # the request as httpx builds it, without its body
        self._wire: dict[str, str] = {}
        self._timeout: Any = None

    async def post(self, content: bytes, *, stream: bool = False) -> httpx.Response:
        """See `Poster.post`."""
        import aiohttp
        import openai

        request = self._request or await self._prepare()
        try:
            response = await self._send(request, content, stream)
        except (TimeoutError, aiohttp.ServerTimeoutError) as exc:
            raise openai.APITimeoutError(request=request) from exc
        except Exception as exc:  # as the SDK: any failure to get a response is a connection error
            raise openai.APIConnectionError(request=request) from exc
        return await self._checked(response)

    async def _prepare(self) -> httpx.Request:
        """The request as the SDK's httpx client builds it (its headers, the SDK's, the URL), once: building httpx
        requests and headers per call cost as much CPU as aiohttp's whole call."""
        import aiohttp

        request = self.own.build_request("POST", self.url, headers=await self._headers(), timeout=self.client.timeout)
        self._wire = {name: value for name, value in request.headers.items() if name != "content-length"}
        timeout = request.extensions.get("timeout", {})
        self._timeout = aiohttp.ClientTimeout(sock_connect=timeout.get("connect"), sock_read=timeout.get("read"))
        self._request = request
        return request

    async def _send(self, request: httpx.Request, content: bytes, stream: bool) -> httpx.Response:
        answer = await self._open().post(
            str(request.url),
            data=content,
            headers=self._wire,
            auto_decompress=False,
            timeout=self._timeout,
            allow_redirects=self.own.follow_redirects,
            server_hostname=self._server_hostname,
            proxy=self._proxy,
        )
        if stream:
            return httpx.Response(
                answer.status, headers=answer.raw_headers, stream=_AiohttpBody(answer), request=request
            )
        try:
            body = await answer.read()
        finally:
            answer.release()
        # httpx decodes the body (gzip, deflate) by its headers, as for its own pool's responses.
        return httpx.Response(answer.status, headers=answer.raw_headers, content=body, request=request)

    def _open(self) -> Any:
        import aiohttp

        if self._session is None:
            # The SDK's pool limits and httpx's keep-alive expiry; httpx's TLS context (SSL_CERT_FILE honoured); any
            # host's cookies, as httpx's jar keeps them (a local server at 127.0.0.1 included). The environment's
            # proxy is read once, here: aiohttp's `trust_env` reads it, and netrc, in a thread at every request.
            connector = aiohttp.TCPConnector(limit=1000, keepalive_timeout=5.0, ssl=httpx.create_ssl_context())
            self._session = aiohttp.ClientSession(connector=connector, cookie_jar=aiohttp.CookieJar(unsafe=True))
            self._proxy = environment_proxy(self.url)
        return self._session

    async def aclose(self) -> None:
        """End the session and its connections."""
        if self._session is not None:
            session, self._session = self._session, None
            await session.close()


def environment_proxy(url: httpx.URL) -> str | None:
    """The proxy the environment names for `url` (HTTPS_PROXY, HTTP_PROXY, ALL_PROXY, NO_PROXY), as httpx's
    `trust_env` reads it; None for none."""
    import urllib.request

    if urllib.request.proxy_bypass(url.host):
        return None
    proxies = urllib.request.getproxies()
    return proxies.get(url.scheme) or proxies.get("all")


class _AiohttpBody(httpx.AsyncByteStream):
    """A streamed aiohttp body as httpx's: its chunks as they come, aiohttp's errors as httpx's transport errors."""

    def __init__(self, answer: Any):
        self.answer = answer

    async def __aiter__(self) -> AsyncIterator[bytes]:
        import aiohttp

        try:
            async for chunk in self.answer.content.iter_any():
                yield chunk
        except (TimeoutError, aiohttp.ServerTimeoutError) as exc:
            raise httpx.ReadTimeout(str(exc) or "read timeout") from exc
        except (aiohttp.ClientError, OSError) as exc:
            raise httpx.ReadError(str(exc) or type(exc).__name__) from exc

    async def aclose(self) -> None:
        self.answer.release()


def plain_transport(http: httpx.AsyncClient) -> httpx.AsyncHTTPTransport | None:
    """The client's transport when it is httpx's default one, with nothing between the client and it (no auth, event
    hooks, proxy mounts, query parameters or cookies set up front) and a pool of default settings; else None."""
    try:
        transport = http._transport
        pool = transport._pool  # type: ignore[attr-defined]  # httpx's private pool; the base transport type lacks it
        plain = (
            type(transport) is httpx.AsyncHTTPTransport
            and not http._mounts
            and http.auth is None
            and not any(http.event_hooks.values())
            and not http.params
            and not http.cookies
            and pool._uds is None
            and pool._local_address is None
            and pool._socket_options is None
            and pool._retries == 0
            and callable(getattr(http, "_build_redirect_request", None))
            and all(
                hasattr(pool, name)
                for name in (
                    "_ssl_context",
                    "_http1",
                    "_http2",
                    "_max_connections",
                    "_max_keepalive_connections",
                    "_keepalive_expiry",
                )
            )
        )
        return transport if plain and isinstance(transport, httpx.AsyncHTTPTransport) else None
    except AttributeError:  # another httpx or httpcore
        return None


def copy_of(http: httpx.AsyncClient) -> httpx.AsyncClient:
    """A new client with the settings of `http`, a plain client (`plain_transport`): a pool of its own."""
    pool = http._transport._pool  # type: ignore[attr-defined]  # httpx's private pool (a plain transport's)
    limits = httpx.Limits(
        max_connections=pool._max_connections,
        max_keepalive_connections=pool._max_keepalive_connections,
        keepalive_expiry=pool._keepalive_expiry,
    )
    return httpx.AsyncClient(
        verify=pool._ssl_context,
        http1=pool._http1,
        http2=pool._http2,
        limits=limits,
        timeout=http.timeout,
        headers=http.headers,
        follow_redirects=http.follow_redirects,
        max_redirects=http.max_redirects,
        trust_env=False,
    )


def sdk_headers(client: openai.AsyncOpenAI) -> httpx.Headers:
    """The headers the SDK's `post` sends, built by the SDK (auth, defaults, its retry count and read timeout)."""
    from openai._models import FinalRequestOptions

    return client._build_headers(FinalRequestOptions.construct(method="post", url=PATH), retries_taken=0)


def is_plain(client: Any) -> bool:
    """Whether `client` needs none of the SDK's per-call hooks (see the module's docstring)."""
    import openai

    try:
        from openai._models import FinalRequestOptions  # noqa: F401 (what `sdk_headers` builds the headers from)

        uses = ("_build_headers", "_prepare_url", "_make_status_error_from_response", "platform_headers")
        return (
            type(client) is openai.AsyncOpenAI
            and isinstance(client._client, httpx.AsyncClient)
            and all(callable(getattr(client, name, None)) for name in uses)
            and getattr(client, "_provider_runtime", None) is None
            and getattr(client, "_workload_identity_auth", None) is None
            and getattr(client, "_api_key_provider", None) is None
            and client.custom_auth is None
            and client._idempotency_header is None
            and not client.default_query
        )
    except (AttributeError, ImportError):  # another SDK version: keep to its public post
        return False
