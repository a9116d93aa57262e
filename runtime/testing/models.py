"""Models with no HTTP (`ModelClient`s): `ScriptedModel` serves bodies in order, `FunctionModel` answers with a
function of the request; `by_purpose` routes the runtime's own calls (summaries, extractions) apart from the
agent's steps, and `is_pressure_alert` tells a request that carries the pressure warning.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable, Sequence

from pagemind.runtime.model.client import ModelRequest, ModelResponse, response_from_body
from pagemind.runtime.testing.prompt_cache import PromptCache
from pagemind.runtime.testing.responses import Body, reply_body

Respond = Callable[[ModelRequest], Body | Awaitable[Body]]
"""A function from a request to a response body (or an awaitable of one)."""

NO_FACTS = '{"facts": []}'


class ScriptedModel:
    """Serves the given response bodies in order and keeps every request; fails loudly when it runs out."""

    def __init__(self, bodies: Sequence[Body] | None = None):
        self.bodies = list(bodies or [])
        self.requests: list[ModelRequest] = []

    def add(self, *bodies: Body) -> None:
        """Queue more responses."""
        self.bodies.extend(bodies)

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """The next scripted response."""
        self.requests.append(request)
        if not self.bodies:
            raise AssertionError(f"scripted model has no response left for request #{len(self.requests)}")
        return response_from_body(self.bodies.pop(0))


class FunctionModel:
    """Answers each request with `function(request)`, a response body (the function may be async); keeps every
    request, so `len(model.requests)` inside the function is the number of this call. With `prompt_cache` set,
    each answer's usage reports the prompt tokens a caching provider would have served from its cache."""

    def __init__(self, function: Respond, prompt_cache: PromptCache | None = None):
        self.function = function
        self.requests: list[ModelRequest] = []
        self.prompt_cache = prompt_cache

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """The function's answer."""
        self.requests.append(request)
        answer = self.function(request)
        body = await answer if inspect.isawaitable(answer) else answer
        if self.prompt_cache is not None:
            body = {**body, "usage": self.prompt_cache.usage({"tools": request.tools, "messages": request.messages})}
        return response_from_body(body)


def by_purpose(
    step: Respond,
    *,
    summarize: str | Respond = "Summary of the earlier conversation.",
    extract: str | Respond = NO_FACTS,
) -> Respond:
    """A `Respond` for `FunctionModel` that answers the runtime's own calls apart from the agent's steps.

    `summarize` answers the recursive summary's requests and `extract` the fact extraction's (a string is a
    plain reply; a function answers like `step`); every other request goes to `step`."""

    def respond(request: ModelRequest) -> Body | Awaitable[Body]:
        answer = {"summarize": summarize, "extract": extract}.get(request.purpose, step)
        return reply_body(answer) if isinstance(answer, str) else answer(request)

    return respond


def is_pressure_alert(request: ModelRequest) -> bool:
    """Whether the request's last message is the pressure monitor's warning (the alert to save what matters)."""
    chat = request.messages[1:]
    if chat and chat[-1]["role"] == "system" and len(chat) > 1 and chat[-2]["role"] == "system":
        chat = chat[:-1]  # the closing restatement of the constraints
    return bool(chat) and chat[-1]["role"] == "system" and "system alert" in (chat[-1].get("content") or "")
