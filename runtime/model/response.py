"""A model's answer, validated before anything of it is stored: the response type, its parsing and normalisation,
and the errors every model client raises.

Providers answer in many shapes (content as a list of parts, tool arguments as an object, an HTML page with status
200, no choices at all); one parser turns every answer into a `ModelResponse` that a strict provider accepts when
it is sent back, or into a typed `ModelBadResponse` that says whether another attempt could help.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pagemind.tools import ToolCall

if TYPE_CHECKING:
    import httpx


class ModelError(RuntimeError):
    """The model could not give an answer."""


class ModelBadResponse(ModelError):
    """The endpoint answered, but not with a usable chat completion; nothing of it is stored.

    `transient` says whether another attempt can help (an HTML error page, an empty body, no choices, an empty
    message); the client retries those and raises this once the attempts are spent."""

    def __init__(self, message: str, transient: bool = False):
        super().__init__(message)
        self.transient = transient


_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.S)


def without_fence(text: str | None) -> str:
    """A reply's text stripped, without the Markdown code fence (```json … ```) models often put around JSON."""
    return _FENCE.sub("", (text or "").strip())


def one_line(text: str, limit: int = 200) -> str:
    """`text` as one line of at most `limit` characters, for error messages (an HTML page must not flood a terminal)."""
    flat = " ".join(str(text).split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


@dataclass(frozen=True)
class ModelResponse:
    """The assistant's answer: text and/or tool calls, with usage and the raw body for traces."""

    content: str | None
    tool_calls: tuple[ToolCall, ...]
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    # Prompt tokens the provider served from its prompt cache (None: it did not say).
    cached_tokens: int | None = None
    finish_reason: str | None = None
    latency_ms: float = 0.0
    raw: dict[str, Any] = field(default_factory=dict)
    # The reply text a live watcher was handed while the answer streamed ("" when it did not): the loop tells the
    # watcher to drop it when the step does not end the turn with that very text. Not part of the answer.
    streamed: str = field(default="", compare=False, repr=False)


def response_from_body(body: Any, latency_ms: float = 0.0) -> ModelResponse:
    """Validate and normalise a chat-completions response body (as received or as recorded).

    Normalised: `content` given as a list of parts (the text parts joined), tool `arguments` given as an object
    (serialised), a missing call id (a unique one), a `refusal` with no content (its text). Anything else that a
    strict provider would reject when it is sent back (no choices, an empty message, a body that is not an object)
    raises ModelBadResponse, so nothing of it is ever stored."""
    if not isinstance(body, dict):
        raise ModelBadResponse(f"the response is a JSON {type(body).__name__}, not a chat completion object")
    choices = body.get("choices")
    if not isinstance(choices, list) or not choices:
        error = body.get("error")
        if error:  # some gateways report an upstream failure with status 200
            detail = error.get("message") if isinstance(error, dict) else error
            raise ModelBadResponse(f"the endpoint returned an error with status 200: {one_line(str(detail))}", True)
        raise ModelBadResponse("the response has no choices", transient=True)
    choice = choices[0]
    message = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(message, dict):
        raise ModelBadResponse("the response's first choice has no message", transient=True)
    content = _content_text(message.get("content"))
    if not (content or "").strip() and isinstance(message.get("refusal"), str):
        content = message["refusal"]
    raw_calls = message.get("tool_calls") or []
    if not isinstance(raw_calls, list):
        raise ModelBadResponse(f"tool_calls is a {type(raw_calls).__name__}, not a list")
    calls = tuple(_tool_call(c) for c in raw_calls)
    if not calls and not (content or "").strip():
        raise ModelBadResponse("the assistant message has neither content nor tool calls", transient=True)
    usage = found if isinstance(found := body.get("usage"), dict) else {}
    return ModelResponse(
        content=content,
        tool_calls=calls,
        prompt_tokens=_count(usage.get("prompt_tokens")),
        completion_tokens=_count(usage.get("completion_tokens")),
        cached_tokens=cached_prompt_tokens(usage),
        finish_reason=choice.get("finish_reason"),
        latency_ms=latency_ms,
        raw=body,
    )


def cached_prompt_tokens(usage: dict[str, Any]) -> int | None:
    """The prompt tokens a usage object says were read from the provider's prompt cache: OpenAI's
    `prompt_tokens_details.cached_tokens`, or Anthropic's `cache_read_input_tokens` as gateways pass it on; None
    when it says neither."""
    details = usage.get("prompt_tokens_details")
    if isinstance(details, dict) and (cached := _count(details.get("cached_tokens"))) is not None:
        return cached
    return _count(usage.get("cache_read_input_tokens"))


def _content_text(content: Any) -> str | None:
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts: the text ones, in order (chunks of one text, so no separator)
        texts = [p if isinstance(p, str) else p.get("text") for p in content if isinstance(p, (str, dict))]
        return "".join(t for t in texts if isinstance(t, str))
    raise ModelBadResponse(f"the message content is a {type(content).__name__}, not text")


def _tool_call(raw: Any) -> ToolCall:
    function = raw.get("function") if isinstance(raw, dict) else None
    if not isinstance(function, dict):
        raise ModelBadResponse("a tool call has no function", transient=True)
    arguments = function.get("arguments")
    if arguments is None:
        arguments = ""
    elif not isinstance(arguments, str):  # an object (or any JSON value) where the API has a JSON string
        arguments = json.dumps(arguments, ensure_ascii=False)
    # A server that omits call ids gets unique ones: a reused id would pair results with the wrong call.
    call_id = raw.get("id")
    return ToolCall(
        str(call_id) if call_id else f"call_{uuid.uuid4().hex[:12]}", str(function.get("name") or ""), arguments
    )


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def response_from_http(response: httpx.Response, latency_ms: float = 0.0) -> ModelResponse:
    """Parse a successful HTTP response's body into a validated ModelResponse (ModelBadResponse if unusable)."""
    data = response.content
    if not data.strip():
        raise ModelBadResponse(f"the endpoint returned an empty body (HTTP {response.status_code})", transient=True)
    try:
        body = json.loads(data)
    except ValueError:
        text = data.decode("utf-8", "replace")
        if "html" in response.headers.get("content-type", "") or text.lstrip().startswith("<"):
            raise ModelBadResponse(
                f"the endpoint returned an HTML page (HTTP {response.status_code}), not JSON: {one_line(text, 120)}",
                transient=True,
            ) from None
        # Transient: a body cut short by a proxy or a dropped connection.
        raise ModelBadResponse(f"the endpoint returned malformed JSON: {one_line(text, 120)}", transient=True) from None
    return response_from_body(body, latency_ms)
