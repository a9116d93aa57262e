"""A request's body bytes, joined from parts encoded once (`ModelRequest.encoded`), are `encode_json(body())`
whatever the request holds."""

from __future__ import annotations

import itertools

from pagemind.runtime.messages import encode_json
from pagemind.runtime.model.request import ModelRequest, tools_json
from pagemind.runtime.model.stream import STREAM_OPTIONS

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "send_message",
            "description": "Say it: «café» ☕",
            "parameters": {"type": "object", "properties": {"m": {"type": "string"}}},
        },
    },
    {"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}},
]
MESSAGES = [
    {"role": "system", "content": "You are \x00slot\x00 a test.\nline two"},  # placeholders of any kind
    {"role": "user", "content": 'quote " backslash \\ and \u2028, NUL \x00'},
    {
        "role": "assistant",
        "content": "",
        "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"x": 1}'}}],
    },
    {"role": "tool", "content": "done", "tool_call_id": "c1"},
]


def test_every_kind_of_request_encodes_as_its_whole_body():
    for joined, tools, response_format, extra, count in itertools.product(
        (False, True),
        (False, True),
        (None, {"type": "json_object"}),
        (None, {}, STREAM_OPTIONS, {"temperature": 0.0, "stream": True}),
        (0, 1, 4),
    ):
        messages = MESSAGES[:count]
        request = ModelRequest(
            "gpt-4o-mini",
            messages,
            TOOLS if tools else [],
            0.7,
            123,
            encoded_messages=tuple(map(encode_json, messages)) if joined else None,
            response_format=response_format,
        )
        expected = encode_json({**request.body(), **extra} if extra else request.body())
        assert request.encoded(extra) == expected, (joined, tools, response_format, extra, count)


def test_encoded_messages_that_do_not_match_are_not_used():
    request = ModelRequest("m", MESSAGES, TOOLS, 0.7, 10, encoded_messages=(b'{"role":"user","content":"stale"}',))
    assert request.encoded() == encode_json(request.body())


def test_tool_schemas_are_encoded_once_per_set_and_a_new_set_is_encoded_anew():
    first = tools_json(TOOLS)
    assert tools_json(list(TOOLS)) is first  # the same schemas in a new list: the cached bytes
    changed = [TOOLS[0], {**TOOLS[1], "type": "other"}]  # another schema object: encoded again
    assert tools_json(changed) == encode_json(changed) != first
