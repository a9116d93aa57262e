"""Which poster a model client gets (`transports`: the SDK's own post, `LeanPost` on its httpx pool, or
`AiohttpPost`), made once per client and kept on it, and closing what a poster holds beside the client."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pagemind.runtime.model.transports import AiohttpPost, LeanPost, Poster, SdkPost, is_plain

if TYPE_CHECKING:
    import openai

# A client's poster hangs off the client itself, not off a dictionary keyed by it: the poster refers to its client,
# so a dictionary's value would keep its own key alive, and with it the client's pools and their event loop, for
# ever. As an attribute the two form a cycle, which the collector frees with the client.
_ATTRIBUTE = "_pagemind_poster"


def poster_for(client: openai.AsyncOpenAI, http: str = "httpx") -> Poster:
    """The poster of `client`, made once per client (so its headers are built once for every agent sharing it):
    `http` "aiohttp" posts on an aiohttp session (`AiohttpPost`), "httpx" on the client's httpx pool (`LeanPost`);
    a client that needs the SDK's per-call hooks gets the SDK's own post either way (`SdkPost`)."""
    poster = getattr(client, _ATTRIBUTE, None)
    if poster is None:
        if not is_plain(client):
            poster = SdkPost(client)
        else:
            poster = AiohttpPost(client) if http == "aiohttp" else LeanPost(client)
        setattr(client, _ATTRIBUTE, poster)
    return poster


async def close_poster(client: openai.AsyncOpenAI) -> None:
    """Close what the client's poster holds beside the SDK client (an aiohttp session, httpx copies), if any."""
    poster = getattr(client, _ATTRIBUTE, None)
    if poster is not None and hasattr(poster, "aclose"):
        await poster.aclose()
