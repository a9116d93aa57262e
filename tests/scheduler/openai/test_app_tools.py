"""The app's own tools through the proxy, with the official openai SDK as the client (sync, async, streamed): the
agent's model calls an app tool, the app gets `tool_calls`, sends the result, and the turn resumes with it; memory
calls stay inside; an app that never answers leaves no split pair; retries store nothing twice.

The scripted agent (`AppAgent`): "weather?" calls the app's `get_weather`; "mixed" calls a memory tool and
`get_weather` in one step; a forced `tool_choice` it obeys (the city "Bergen"); to `get_weather`'s result it
replies `weather: <result>` (read from its prompt); to anything else `echo: <text>`. Every model request it gets
is kept, to check its history is strict-provider shaped.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import openai
import pytest

from pagemind.runtime.app_calls import NO_RESULT
from pagemind.scheduler.message_turn import AppTurn, redacted_app_turn
from tests.scheduler.openai.served import Served, served
from tests.support.model_server import last_turn_message, last_user_text, tool_call, tool_calls

TEMPLATE = "template:companion"
WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The weather in a city now.",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
    },
}


class AppAgent:
    """The scripted agent (the module docstring); `requests`: every step request's body it got."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []

    def __call__(self, body: dict[str, Any]) -> dict[str, Any]:
        self.requests.append(body)
        last = last_turn_message(body)
        forced = body.get("tool_choice")
        if isinstance(forced, dict):
            return tool_call(forced["function"]["name"], {"city": "Bergen"})
        if last["role"] == "tool":
            called = {c["id"]: c["function"]["name"] for m in body["messages"] for c in m.get("tool_calls") or ()}
            if called[last["tool_call_id"]] == "get_weather":
                return tool_call("send_message", {"message": f"weather: {last['content']}"})
        text = last_user_text(body)
        offered = {t["function"]["name"] for t in body.get("tools", [])}
        if last["role"] == "user" and text == "weather?" and "get_weather" in offered:
            return tool_call("get_weather", {"city": "Oslo"})
        if last["role"] == "user" and text == "mixed" and "get_weather" in offered:
            return tool_calls(
                ("core_memory_append", {"label": "human", "content": "[asked about Oslo]"}),
                ("get_weather", {"city": "Oslo, Norway"}),
            )
        return tool_call("send_message", {"message": f"echo: {text}"})


def say(text: str) -> dict[str, Any]:
    return {"role": "user", "content": text}


def result(call_id: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": content}


def assert_paired(messages: list[dict[str, Any]]) -> None:
    """A strict provider's rule: every call answered right after its message, every result after its call."""
    waiting: set[str] = set()
    for message in messages:
        if message["role"] == "tool":
            assert message["tool_call_id"] in waiting, message
            waiting.discard(message["tool_call_id"])
            continue
        assert not waiting, f"calls without results: {waiting}"
        if message["role"] == "assistant":
            waiting = {c["id"] for c in message.get("tool_calls") or ()}
    assert not waiting, f"calls without results: {waiting}"


def tool_messages(server: Served, agent: str, call_id: str) -> list[str]:
    """The stored results of one call."""
    record = server.store.get_agent(agent)
    assert record is not None
    return [m.content or "" for m in server.store.all_messages(record.id) if m.tool_call_id == call_id]


def test_a_call_to_the_apps_tool_is_handed_out_and_its_result_resumes_the_turn(tmp_path, database_url):
    agent = AppAgent()
    with served(tmp_path, database_url, users=("u1",), answer=agent) as server:
        client = openai.OpenAI(base_url=server.url, api_key=server.keys["u1"], max_retries=0)
        history: list[Any] = [say("weather?")]
        paused = client.chat.completions.create(model=TEMPLATE, messages=history, tools=[WEATHER])
        choice = paused.choices[0]
        assert choice.finish_reason == "tool_calls" and choice.message.content is None
        (call,) = choice.message.tool_calls or []
        assert (call.type, call.function.name, json.loads(call.function.arguments)) == (
            "function",
            "get_weather",
            {"city": "Oslo"},
        )
        offered = {t["function"]["name"] for t in agent.requests[-1]["tools"]}
        assert {"get_weather", "send_message", "core_memory_append"} <= offered  # beside the agent's own
        # The app runs its tool and sends the result back, with the whole history (the SDK's own message object).
        history += [choice.message, result(call.id, "12°C and raining")]
        resumed = client.chat.completions.create(model=TEMPLATE, messages=history, tools=[WEATHER])
        assert resumed.choices[0].message.content == "weather: 12°C and raining"  # read from its prompt
        assert resumed.choices[0].finish_reason == "stop"
        assert_paired(agent.requests[-1]["messages"])
        assert server.user_messages("companion-u1") == ["weather?"]  # one turn: the result resumed it
        # A retry of the same request (a lost answer): the same reply, nothing stored twice.
        again = client.chat.completions.create(model=TEMPLATE, messages=history, tools=[WEATHER])
        assert again.choices[0].message.content == "weather: 12°C and raining"
        # An app that sends only what is new (no key at all): the result is stored once still.
        alone = client.chat.completions.create(model=TEMPLATE, messages=[result(call.id, "12°C and raining")])
        assert alone.choices[0].message.content == "weather: 12°C and raining"
        assert tool_messages(server, "companion-u1", call.id) == ["12°C and raining"]
        assert server.user_messages("companion-u1") == ["weather?"]


def test_a_mixed_step_runs_the_memory_call_and_hands_out_the_apps_streamed(tmp_path, sqlite_url):
    agent = AppAgent()
    with served(tmp_path, sqlite_url, users=("u2",), answer=agent) as server:
        client = openai.OpenAI(base_url=server.url, api_key=server.keys["u2"], max_retries=0)
        with client.chat.completions.stream(model=TEMPLATE, messages=[say("mixed")], tools=[WEATHER]) as stream:
            events = list(stream)
            final = stream.get_final_completion()
        choice = final.choices[0]
        assert choice.finish_reason == "tool_calls"
        (call,) = choice.message.tool_calls or []  # the memory call stayed inside
        assert call.function.name == "get_weather"
        assert json.loads(call.function.arguments) == {"city": "Oslo, Norway"}
        pieces = [e for e in events if e.type == "tool_calls.function.arguments.delta"]
        assert len(pieces) > 1 and "".join(p.arguments_delta for p in pieces) == call.function.arguments
        human = server.run(_block(server, "companion-u2", "human"))
        assert "[asked about Oslo]" in human  # the memory call ran before the pause

        async def resume() -> openai.types.chat.ChatCompletion:
            async_client = openai.AsyncOpenAI(base_url=server.url, api_key=server.keys["u2"], max_retries=0)
            history = [say("mixed"), choice.message, result(call.id, "sunny")]
            answer = await async_client.chat.completions.create(model=TEMPLATE, messages=history, tools=[WEATHER])
            await async_client.close()
            return answer

        resumed = asyncio.run(resume())
        assert resumed.choices[0].message.content == "weather: sunny"
        prompt = agent.requests[-1]["messages"]
        assert_paired(prompt)
        (step,) = [m for m in prompt if any(c["id"] == call.id for c in m.get("tool_calls") or ())]
        assert [c["function"]["name"] for c in step["tool_calls"]] == ["core_memory_append", "get_weather"]


async def _block(server: Served, agent: str, label: str) -> str:
    async with server.daemon.agent(agent) as loaded:
        return str(loaded.memory.get(label).value)


def test_an_app_that_never_answers_leaves_no_split_pair(tmp_path, database_url):
    agent = AppAgent()
    with served(tmp_path, database_url, users=("u3",), answer=agent) as server:
        client = openai.OpenAI(base_url=server.url, api_key=server.keys["u3"], max_retries=0)
        paused = client.chat.completions.create(model=TEMPLATE, messages=[say("weather?")], tools=[WEATHER])
        (call,) = paused.choices[0].message.tool_calls or []
        # The app goes on with a new message and no result.
        history = [say("weather?"), paused.choices[0].message, say("never mind")]
        reply = client.chat.completions.create(model=TEMPLATE, messages=history, tools=[WEATHER])
        assert reply.choices[0].message.content == "echo: never mind"
        prompt = agent.requests[-1]["messages"]
        assert_paired(prompt)
        assert [m["content"] for m in prompt if m.get("tool_call_id") == call.id] == [NO_RESULT]
        assert tool_messages(server, "companion-u3", call.id) == [NO_RESULT]  # stored, paired with its call
        # A result that names a call nobody made, sent with nothing paused: refused, nothing stored.
        with pytest.raises(openai.BadRequestError) as unknown:
            client.chat.completions.create(model=TEMPLATE, messages=[result("call_nobody", "x")], tools=[WEATHER])
        assert unknown.value.body["code"] == "no_pending_calls"
        assert tool_messages(server, "companion-u3", "call_nobody") == []


@pytest.mark.parametrize("stream", ["sse", "ignore"])  # a model server that answers one JSON body: the same
def test_a_paused_turn_streamed_and_a_result_for_an_unknown_call(tmp_path, sqlite_url, stream):
    agent = AppAgent()
    with served(tmp_path, sqlite_url, users=("u4",), answer=agent, stream=stream) as server:
        client = openai.OpenAI(base_url=server.url, api_key=server.keys["u4"], max_retries=0)
        chunks = list(
            client.chat.completions.create(model=TEMPLATE, messages=[say("weather?")], tools=[WEATHER], stream=True)
        )
        head = chunks[1].choices[0].delta.tool_calls or []
        assert chunks[0].choices[0].delta.role == "assistant"
        assert (head[0].index, head[0].type, head[0].function.name) == (0, "function", "get_weather")
        call_id = head[0].id
        assert chunks[-1].choices[0].finish_reason == "tool_calls"
        arguments = "".join(
            (c.choices[0].delta.tool_calls or [])[0].function.arguments or ""
            for c in chunks
            if c.choices[0].delta.tool_calls
        )
        assert json.loads(arguments) == {"city": "Oslo"}
        # The app answers with a call id the agent never handed out: the open call gets the "no result" result.
        history = [say("weather?"), {"role": "assistant", "tool_calls": []}, result("call_wrong", "20°C")]
        reply = client.chat.completions.create(model=TEMPLATE, messages=history, tools=[WEATHER])
        assert reply.choices[0].message.content == f"weather: {NO_RESULT}"
        assert_paired(agent.requests[-1]["messages"])
        assert tool_messages(server, "companion-u4", "call_wrong") == []
        assert tool_messages(server, "companion-u4", call_id or "") == [NO_RESULT]


def test_what_the_proxy_refuses_of_an_apps_tools(tmp_path, sqlite_url):
    with served(tmp_path, sqlite_url, users=("u5",)) as server:
        client = openai.OpenAI(base_url=server.url, api_key=server.keys["u5"], max_retries=0)
        clash = {"type": "function", "function": {"name": "send_message", "parameters": {"type": "object"}}}
        other = {"type": "function", "function": {"name": "get_time"}}
        cases: list[tuple[dict[str, Any], str, str]] = [
            ({"tools": [WEATHER, clash]}, "tool_name_taken", "tools"),
            ({"tools": [WEATHER, other], "tool_choice": "required"}, "tool_choice_unsupported", "tool_choice"),
            (
                {"tools": [WEATHER], "tool_choice": {"type": "function", "function": {"name": "get_time"}}},
                "invalid_tool_choice",
                "tool_choice",
            ),
            ({"tools": [WEATHER, WEATHER]}, "invalid_tools", "tools"),
            ({"tools": [{"type": "code_interpreter"}]}, "invalid_tools", "tools[0]"),
        ]
        for extra, code, param in cases:
            with pytest.raises(openai.BadRequestError) as refused:
                client.chat.completions.create(model=TEMPLATE, messages=[say("weather?")], **extra)
            body = refused.value.body
            assert isinstance(body, dict) and (body["code"], body["param"]) == (code, param), body
        assert server.user_messages("companion-u5") == []  # nothing stored for a refusal
        # `tool_choice: none`: the app's tools are not offered; the agent answers as it would without them.
        plain = client.chat.completions.create(
            model=TEMPLATE, messages=[say("weather?")], tools=[WEATHER], tool_choice="none"
        )
        assert plain.choices[0].message.content == "echo: weather?" and plain.choices[0].finish_reason == "stop"


def test_a_forced_tool_choice_makes_the_first_step_call_the_apps_function(tmp_path, sqlite_url):
    agent = AppAgent()
    with served(tmp_path, sqlite_url, users=("u6",), answer=agent) as server:
        client = openai.OpenAI(base_url=server.url, api_key=server.keys["u6"], max_retries=0)
        named = {"type": "function", "function": {"name": "get_weather"}}
        for choice in (named, "required"):  # `required` with one tool: that tool
            forced = client.chat.completions.create(
                model=TEMPLATE, messages=[say("hello")], tools=[WEATHER], tool_choice=choice
            )
            (call,) = forced.choices[0].message.tool_calls or []
            assert (call.function.name, forced.choices[0].finish_reason) == ("get_weather", "tool_calls")
            assert agent.requests[-1]["tool_choice"] == named  # sent to the agent's model as asked
            # The result resumes the turn with the model choosing again (`auto`).
            history = [say("hello"), forced.choices[0].message, result(call.id, "windy")]
            done = client.chat.completions.create(model=TEMPLATE, messages=history, tools=[WEATHER])
            assert done.choices[0].message.content == "weather: windy"
            assert agent.requests[-1]["tool_choice"] == "auto"


def test_an_app_turn_is_redacted_in_the_inbox_as_a_message_is():
    async def redact(text: str) -> str:
        return text.replace("lin@example.com", "<EMAIL_1>")

    turn = AppTurn(text="mail lin@example.com", tools=[WEATHER], results={"call_1": "sent to lin@example.com"})
    stored = AppTurn.model_validate_json(asyncio.run(redacted_app_turn(turn.encoded(), redact)))
    assert (stored.text, stored.results, stored.tools) == ("mail <EMAIL_1>", {"call_1": "sent to <EMAIL_1>"}, [WEATHER])
