"""Streamed completions (`stream: true`) at the HTTP layer (respx): the chunks make the very response the same
request gets without streaming, whatever the network does to them; the reply's text reaches the watcher as it
arrives (out of `send_message`'s partial JSON, or plain content); and the strict world — HTML or a JSON error
with 200, an error chunk, a stream cut mid-way — is retried as a whole, the watcher told to drop what it had."""

from __future__ import annotations

import json

import httpx
import pytest

from pagemind.runtime.events import ReplyDeltaEvent, ReplyResetEvent
from pagemind.runtime.model.client import ModelBadResponse, ModelRequest, ModelRequestRejected
from pagemind.runtime.model.response import response_from_body
from pagemind.runtime.model.stream import STREAM_OPTIONS
from pagemind.runtime.reply_stream import JsonStringField, ReplyStream
from pagemind.runtime.testing.endpoint import http_error
from pagemind.runtime.testing.responses import call, reply_body, tool_call_body, tool_calls_body
from pagemind.runtime.testing.sse import sse_bytes, stream_chunks, streamed_response

REQUEST = ModelRequest("gpt-4o-mini", [{"role": "user", "content": "hi"}], [], 0.5, 100)
TRICKY = 'Ça va? "oui" \\ back\\slash\nnew line\ttab 😀 日本 </end>'


class Watcher:
    """An observer that keeps what it is told."""

    wants_deltas = True

    def __init__(self) -> None:
        self.events: list = []

    def on_event(self, event) -> None:
        self.events.append(event)

    def held(self) -> str:
        """What a client building the reply from the deltas holds now (a reset empties it)."""
        text = ""
        for event in self.events:
            if isinstance(event, ReplyDeltaEvent):
                text += event.text
            elif isinstance(event, ReplyResetEvent):
                text = ""
        return text

    def resets(self) -> list[str]:
        return [e.reason for e in self.events if isinstance(e, ReplyResetEvent)]


def sink(watcher: Watcher, step: int = 1) -> ReplyStream:
    return ReplyStream(watcher, step, frozenset({"send_message"}))


# -- the message out of partial JSON ------------------------------------------------------------------------------

ARGUMENTS = [
    json.dumps({"message": TRICKY}),  # ASCII escapes, a surrogate pair for the emoji
    json.dumps({"message": TRICKY}, ensure_ascii=False),  # raw UTF-8 characters
    json.dumps({"note": {"message": "not this"}, "list": ["message", 1], "message": TRICKY, "after": "x"}),
    '{ "message" : "a\\u0041\\/b" , "n": 3}',
    '{"mess\\u0061ge": "escaped key"}',
    '{"message": 42, "other": "none"}',
]


@pytest.mark.parametrize("arguments", ARGUMENTS)
def test_the_message_field_decodes_the_same_whatever_the_fragments(arguments):
    expected = json.loads(arguments).get("message")
    expected = expected if isinstance(expected, str) else ""
    one_by_one = JsonStringField()
    assert "".join(one_by_one.feed(c) for c in arguments) == expected
    for cut in range(1, len(arguments)):
        halves = JsonStringField()
        assert halves.feed(arguments[:cut]) + halves.feed(arguments[cut:]) == expected, cut


def test_a_field_given_twice_restarts():
    field = JsonStringField()
    assert field.feed('{"message": "first", "message": "') == "first"
    assert field.restarted
    assert field.feed('second"}') == "second"


# -- the stream makes the same response -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "body",
    [
        tool_call_body("send_message", {"message": TRICKY}),
        tool_calls_body(
            call("core_memory_append", {"label": "human", "content": "Lin"}),
            call("send_message", {"message": "two calls"}),
            content="a note first",
        ),
        reply_body(TRICKY),
    ],
    ids=["send_message", "two_calls_and_content", "plain"],
)
@pytest.mark.parametrize("cut", [1, 7, 10_000])
async def test_chunks_split_anywhere_assemble_into_the_non_streaming_response(scripted_openai, body, cut):
    scripted_openai.stream_size, scripted_openai.stream_cut = 2, cut
    scripted_openai.add(body)
    streamed = await scripted_openai.client().stream(REQUEST, sink(Watcher()))
    plain = response_from_body(body)
    assert streamed.raw == body  # what traces record: the same body as without streaming
    assert (
        streamed.content,
        streamed.tool_calls,
        streamed.finish_reason,
        streamed.prompt_tokens,
        streamed.completion_tokens,
    ) == (plain.content, plain.tool_calls, plain.finish_reason, plain.prompt_tokens, plain.completion_tokens)


async def test_a_streamed_request_adds_only_the_stream_options(scripted_openai):
    scripted_openai.add(reply_body("a"), reply_body("b"))
    client = scripted_openai.client()
    await client.complete(REQUEST)
    await client.stream(REQUEST, sink(Watcher()))
    plain, streamed = scripted_openai.requests
    assert "stream" not in plain and streamed == {**plain, **STREAM_OPTIONS}
    assert (
        REQUEST.encoded(STREAM_OPTIONS)
        == json.dumps({**REQUEST.body(), **STREAM_OPTIONS}, separators=(",", ":")).encode()
    )


async def test_usage_arrives_in_the_last_chunk_without_choices(scripted_openai):
    body = reply_body("hi")
    body["usage"] = {"prompt_tokens": 11, "completion_tokens": 2, "total_tokens": 13}
    chunks = stream_chunks(body)
    assert chunks[-1]["choices"] == [] and "usage" not in chunks[-2]
    scripted_openai.add(body)
    response = await scripted_openai.client().stream(REQUEST, sink(Watcher()))
    assert (response.prompt_tokens, response.completion_tokens) == (11, 2)


# -- the reply as it arrives ------------------------------------------------------------------------------------------


async def test_the_send_message_text_arrives_in_pieces_that_make_the_reply(scripted_openai):
    scripted_openai.stream_size, scripted_openai.stream_cut = 1, 1  # UTF-8 characters split between reads too
    scripted_openai.add(tool_call_body("send_message", {"message": TRICKY}))
    watcher = Watcher()
    await scripted_openai.client().stream(REQUEST, sink(watcher))
    deltas = [e for e in watcher.events if isinstance(e, ReplyDeltaEvent)]
    assert len(deltas) > 10 and {e.source for e in deltas} == {"send_message"} and {e.step for e in deltas} == {1}
    assert watcher.held() == TRICKY and not watcher.resets()


async def test_plain_content_is_streamed_and_content_before_a_tool_call_is_reset(scripted_openai):
    scripted_openai.add(
        reply_body("Just text."),
        tool_calls_body(call("send_message", {"message": "The reply."}), content="Thinking..."),
    )
    client = scripted_openai.client()
    plain = Watcher()
    await client.stream(REQUEST, sink(plain))
    assert plain.held() == "Just text." and {e.source for e in plain.events} == {"content"}
    noted = Watcher()
    await client.stream(REQUEST, sink(noted))
    assert noted.held() == "The reply." and noted.resets() == [
        "the model's text came with a tool call: it was not the reply"
    ]


async def test_only_reply_tools_are_streamed(scripted_openai):
    scripted_openai.add(tool_call_body("core_memory_append", {"label": "human", "message": "not a reply"}))
    watcher = Watcher()
    await scripted_openai.client().stream(REQUEST, sink(watcher))
    assert watcher.events == []


# -- the strict world ---------------------------------------------------------------------------------------------------


async def test_keep_alives_and_a_provider_that_ignores_stream_are_fine(scripted_openai):
    body = tool_call_body("send_message", {"message": "hello"})
    assert sse_bytes(stream_chunks(body)).startswith(b": keep-alive\n\n")
    scripted_openai.add(httpx.Response(200, json=body))  # answered with one JSON body despite `stream`
    watcher = Watcher()
    response = await scripted_openai.client().stream(REQUEST, sink(watcher))
    assert response.raw == body and watcher.events == []  # nothing streamed, the same answer


@pytest.mark.parametrize(
    "bad",
    [
        httpx.Response(200, text="<html><body>502 Bad Gateway</body></html>", headers={"content-type": "text/html"}),
        httpx.Response(200, json={"error": {"message": "upstream overloaded"}}),
        httpx.Response(
            200,
            content=b'data: {"error": {"message": "overloaded mid-stream"}}\n\n',
            headers={"content-type": "text/event-stream"},
        ),
        httpx.Response(200, content=b"data: {not json\n\n", headers={"content-type": "text/event-stream"}),
        httpx.Response(200, content=b"data: [DONE]\n\n", headers={"content-type": "text/event-stream"}),
    ],
    ids=["html", "json_error", "error_chunk", "broken_chunk", "empty_stream"],
)
async def test_unusable_answers_with_200_are_retried(scripted_openai, bad):
    scripted_openai.add(bad, tool_call_body("send_message", {"message": "made it"}))
    watcher = Watcher()
    response = await scripted_openai.client().stream(REQUEST, sink(watcher))
    assert response.tool_calls[0].name == "send_message" and len(scripted_openai.sleeps) == 1
    assert watcher.held() == "made it"


@pytest.mark.parametrize("broken", [False, True], ids=["body_ends", "connection_drops"])
async def test_a_stream_cut_mid_way_is_retried_whole_and_its_partial_reply_reset(scripted_openai, broken):
    body = tool_call_body("send_message", {"message": "A long reply that will be cut."})
    scripted_openai.add(
        streamed_response(body, stop_after=len(sse_bytes(stream_chunks(body))) // 2, broken=broken), body
    )
    watcher = Watcher()
    response = await scripted_openai.client().stream(REQUEST, sink(watcher))
    assert response.raw == body and len(scripted_openai.requests) == 2
    first_reset = next(i for i, e in enumerate(watcher.events) if isinstance(e, ReplyResetEvent))
    assert "".join(e.text for e in watcher.events[:first_reset])  # the first attempt had streamed something
    assert "partial reply is discarded" in watcher.resets()[0]
    assert watcher.held() == "A long reply that will be cut."


async def test_a_stream_that_always_breaks_ends_in_a_typed_error_and_a_reset(scripted_openai):
    body = reply_body("never whole; " * 20)
    cut = len(sse_bytes(stream_chunks(body))) * 2 // 3
    scripted_openai.add(*[streamed_response(body, stop_after=cut) for _ in range(2)])
    watcher = Watcher()
    with pytest.raises(ModelBadResponse, match="no usable response .* in 2 attempts; last: .*before its end"):
        await scripted_openai.client(max_attempts=2).stream(REQUEST, sink(watcher))
    assert len(watcher.resets()) == 2 and watcher.held() == ""


async def test_a_server_that_refuses_stream_gets_plain_requests_from_then_on(scripted_openai):
    scripted_openai.add(
        http_error(400, "Unrecognized request argument supplied: stream_options"),
        reply_body("plain one"),
        reply_body("plain two"),
    )
    client = scripted_openai.client()
    watcher = Watcher()
    assert (await client.stream(REQUEST, sink(watcher))).content == "plain one"
    assert (await client.stream(REQUEST, sink(watcher))).content == "plain two"
    assert [("stream" in r) for r in scripted_openai.requests] == [True, False, False] and watcher.events == []


async def test_crlf_lines_multi_line_data_and_a_done_without_its_blank_line(scripted_openai):
    wire = (
        b'event: message\r\ndata: {"id": "c1", "choices": [{"index": 0,\r\n'
        b'data:"delta": {"content": "h\xc3\xa9"}, "finish_reason": "stop"}]}\r\n\r\n: ping\r\n\r\ndata: [DONE]'
    )
    scripted_openai.add(httpx.Response(200, content=wire, headers={"content-type": "text/event-stream"}))
    watcher = Watcher()
    response = await scripted_openai.client().stream(REQUEST, sink(watcher))
    assert response.content == "hé" == watcher.held() and response.finish_reason == "stop"
    assert response.raw["id"] == "c1" and response.raw["object"] == "chat.completion"


@pytest.mark.parametrize(
    "status, message",
    [
        (400, "temperature must be at most 2"),
        (403, "stream access denied for this key"),
        (400, "upstream provider error"),
    ],
)
async def test_a_rejection_that_is_not_about_streaming_is_raised_and_streaming_stays_on(
    scripted_openai, status, message
):
    scripted_openai.add(http_error(status, message), reply_body("streamed"))
    client = scripted_openai.client()
    with pytest.raises(ModelRequestRejected, match=message.split()[0]):
        await client.stream(REQUEST, sink(Watcher()))
    assert len(scripted_openai.requests) == 1  # the rejected request is not sent again
    watcher = Watcher()
    assert (await client.stream(REQUEST, sink(watcher))).content == "streamed" == watcher.held()
