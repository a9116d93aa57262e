"""Every response shape a provider has been seen to send is either normalised or a typed model error, retried
when another attempt can help, and never a traceback; nothing unvalidated reaches the caller (issue 10, item 4)."""

from __future__ import annotations

import json

import httpx
import pytest

from pagemind.runtime.model.client import ModelBadResponse, ModelRequest, response_from_body
from pagemind.runtime.testing.responses import reply_body, tool_call_body

REQUEST = ModelRequest("m", [{"role": "user", "content": "hi"}], [], 0.5, 100)


def body_with(message: dict) -> dict:
    return {"id": "x", "choices": [{"index": 0, "message": {"role": "assistant", **message}, "finish_reason": "stop"}]}


def raw(content: bytes, status: int = 200, content_type: str = "application/json") -> httpx.Response:
    return httpx.Response(status, content=content, headers={"content-type": content_type})


HTML = b"<!DOCTYPE html><html><head><title>502 Bad Gateway</title></head>\n<body>nginx</body></html>"

# (name, the unusable response, what the final error says): each is transient, so it is retried.
TRANSIENT = [
    ("malformed JSON", raw(b'{"choices": [{"message": {"content": "hi'), "malformed JSON"),
    ("HTML page with status 200", raw(HTML, content_type="text/html"), "HTML page"),
    ("HTML page labelled JSON", raw(HTML), "HTML page"),
    ("empty body", raw(b""), "empty body"),
    ("empty choices", httpx.Response(200, json={"id": "x", "choices": []}), "no choices"),
    ("no choices key", httpx.Response(200, json={"id": "x"}), "no choices"),
    (
        "an error object with status 200",
        httpx.Response(200, json={"error": {"message": "upstream\nfailed"}}),
        "error with status 200: upstream failed",
    ),
    ("null content, no tool calls", httpx.Response(200, json=body_with({"content": None})), "neither content"),
    ("empty content, no tool calls", httpx.Response(200, json=body_with({"content": ""})), "neither content"),
    ("choice without a message", httpx.Response(200, json={"choices": [{"index": 0}]}), "no message"),
]


@pytest.mark.parametrize("bad,says", [t[1:] for t in TRANSIENT], ids=[t[0] for t in TRANSIENT])
async def test_a_transient_bad_response_is_retried_and_then_succeeds(scripted_openai, bad, says):
    scripted_openai.add(bad, reply_body("hello"))
    response = await scripted_openai.client().complete(REQUEST)
    assert response.content == "hello"
    assert len(scripted_openai.requests) == 2 and len(scripted_openai.sleeps) == 1


@pytest.mark.parametrize("bad,says", [t[1:] for t in TRANSIENT], ids=[t[0] for t in TRANSIENT])
async def test_a_transient_bad_response_every_time_is_one_clear_error(scripted_openai, bad, says):
    scripted_openai.add(*[bad] * 3)
    with pytest.raises(ModelBadResponse) as caught:
        await scripted_openai.client(max_attempts=3).complete(REQUEST)
    message = str(caught.value)
    assert says in message and "in 3 attempts" in message
    assert "\n" not in message and len(message) < 400
    assert len(scripted_openai.requests) == 3


@pytest.mark.parametrize(
    "body,says",
    [
        ([{"choices": []}], "JSON list"),
        ("just a string", "JSON str"),
        (body_with({"content": 42}), "content is a int"),
        (body_with({"content": None, "tool_calls": {"id": "c"}}), "not a list"),
    ],
    ids=["a JSON array", "a JSON string", "numeric content", "tool_calls as an object"],
)
async def test_a_response_no_retry_can_fix_fails_at_once(scripted_openai, body, says):
    scripted_openai.add(httpx.Response(200, json=body))
    with pytest.raises(ModelBadResponse, match=says):
        await scripted_openai.client().complete(REQUEST)
    assert len(scripted_openai.requests) == 1 and scripted_openai.sleeps == []


async def test_tool_arguments_given_as_an_object_are_serialised(scripted_openai):
    body = tool_call_body("core_memory_append", "{}")
    body["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = {"label": "human", "content": "Lin ♥"}
    scripted_openai.add(body)
    call = (await scripted_openai.client().complete(REQUEST)).tool_calls[0]
    assert isinstance(call.arguments, str) and json.loads(call.arguments) == {"label": "human", "content": "Lin ♥"}


async def test_content_given_as_parts_is_joined(scripted_openai):
    parts = [
        {"type": "text", "text": "Hello, "},
        {"type": "image_url", "image_url": {"url": "x"}},
        {"type": "text", "text": "Lin."},
        "!",
    ]
    scripted_openai.add(body_with({"content": parts}))
    assert (await scripted_openai.client().complete(REQUEST)).content == "Hello, Lin.!"


def test_a_refusal_with_no_content_becomes_the_content():
    assert (
        response_from_body(body_with({"content": None, "refusal": "I can't help with that."})).content
        == "I can't help with that."
    )


def test_odd_but_usable_fields_are_normalised():
    body = body_with(
        {
            "content": None,
            "tool_calls": [
                {"id": 7, "type": "function", "function": {"name": "f", "arguments": None}},
                {"type": "function", "function": {"name": "g", "arguments": [1, 2]}},
            ],
        }
    )
    body["usage"] = {"prompt_tokens": "12", "completion_tokens": 3}
    response = response_from_body(body)
    assert [(c.id, c.arguments) for c in response.tool_calls][0] == ("7", "")
    assert response.tool_calls[1].arguments == "[1, 2]" and response.tool_calls[1].id.startswith("call_")
    assert (response.prompt_tokens, response.completion_tokens) == (None, 3)


async def test_an_html_5xx_page_is_retried_and_reported_on_one_line(scripted_openai):
    scripted_openai.add(*[raw(HTML, status=502, content_type="text/html")] * 2)
    from pagemind.runtime.model.client import ModelUnavailable

    with pytest.raises(ModelUnavailable, match="failed 2 times; last: HTTP 502") as caught:
        await scripted_openai.client(max_attempts=2).complete(REQUEST)
    assert "\n" not in str(caught.value)
