"""The OpenAI-compatible proxy through the official openai SDK (sync `OpenAI`, `AsyncOpenAI`, streaming) against a
daemon served on a local port, with per-user keys; the agent's own model a scripted local server
(tests/scheduler/openai/served.py: a memory edit, then `echo: <text>`)."""

from __future__ import annotations

import asyncio

import openai
import pytest

from tests.scheduler.openai.served import served

TEMPLATE = "template:companion"


def say(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def answer(text: str) -> dict[str, str]:
    return {"role": "assistant", "content": text}


def test_a_template_agent_is_made_on_first_use_and_its_memory_tools_stay_inside(tmp_path, database_url):
    with served(tmp_path, database_url, users=("u123",)) as server:
        client = openai.OpenAI(base_url=server.url, api_key=server.keys["u123"], max_retries=0)
        made = client.chat.completions.create(model=TEMPLATE, messages=[say("I got the job!")])
        assert made.object == "chat.completion" and made.model == TEMPLATE
        message = made.choices[0].message
        assert (message.role, message.content, message.tool_calls) == ("assistant", "echo: I got the job!", None)
        assert made.choices[0].finish_reason == "stop"
        info = server.daemon.agent_info("companion-u123")
        assert (info.template, info.owner) == ("companion", "u123")  # the key's user owns it
        human = server.run(_block(server, "companion-u123", "human"))
        assert "[I got the job!]" in human  # the memory tool ran, inside the turn
        again = client.chat.completions.create(model="agent:companion-u123", messages=[say("and a raise")])
        assert again.choices[0].message.content == "echo: and a raise"
        assert server.user_messages("companion-u123") == ["I got the job!", "and a raise"]
        listed = [m.id for m in client.models.list()]
        assert listed == ["agent:companion-u123", "template:alice", "template:companion"]  # every YAML makes agents


async def _block(server, agent: str, label: str) -> str:
    async with server.daemon.agent(agent) as loaded:
        return str(loaded.memory.get(label).value)


def test_a_whole_growing_history_stores_each_user_message_once(tmp_path, database_url):
    with served(tmp_path, database_url, users=("u1",)) as server:
        client = openai.OpenAI(base_url=server.url, api_key=server.keys["u1"], max_retries=0)
        history: list[dict[str, str]] = [{"role": "system", "content": "You are the app's bot."}]
        for n in range(1, 6):
            history.append(say(f"message {n}"))
            reply = client.chat.completions.create(model=TEMPLATE, messages=history)
            assert reply.choices[0].message.content == f"echo: message {n}"
            history.append(answer(reply.choices[0].message.content or ""))
        sent = [f"message {n}" for n in range(1, 6)]
        assert server.user_messages("companion-u1") == sent  # the app's system message is not stored either
        # The same request again (a retry after a lost answer): the stored turn's reply, nothing stored.
        retried = client.chat.completions.with_raw_response.create(model=TEMPLATE, messages=history[:-1])
        assert retried.parse().choices[0].message.content == "echo: message 5"
        assert retried.headers["x-pagemind-ignored-system"] == "1"
        assert server.user_messages("companion-u1") == sent
        # An app sending only its new message, keyed: a retry with the same Idempotency-Key is one message ...
        keyed = {"Idempotency-Key": "app-msg-6"}
        for _ in range(2):
            client.chat.completions.create(model=TEMPLATE, messages=[say("ok")], extra_headers=keyed)
        assert server.user_messages("companion-u1") == [*sent, "ok"]
        reused = _raises(openai.ConflictError, client, model=TEMPLATE, messages=[say("not ok")], extra_headers=keyed)
        assert reused["code"] == "idempotency_key_reused"
        # ... and the same words without a key are said again (a user may say "ok" twice).
        client.chat.completions.create(model=TEMPLATE, messages=[say("ok")])
        assert server.user_messages("companion-u1") == [*sent, "ok", "ok"]
        # New user messages in a row are one turn.
        joined = client.chat.completions.create(model=TEMPLATE, messages=[*history, say("one"), say("two")])
        assert joined.choices[0].message.content == "echo: one\n\ntwo"
        assert server.user_messages("companion-u1")[-1] == "one\n\ntwo"


def test_async_and_streamed_answers_are_the_agents_reply(tmp_path, sqlite_url):
    with served(tmp_path, sqlite_url, users=("u7",), stream="sse") as server:

        async def talk() -> tuple[str, list[openai.types.chat.ChatCompletionChunk]]:
            client = openai.AsyncOpenAI(base_url=server.url, api_key=server.keys["u7"], max_retries=0)
            whole = await client.chat.completions.create(model=TEMPLATE, messages=[say("hi there")])
            history = [say("hi there"), answer(whole.choices[0].message.content or ""), say("tell me a long story")]
            stream = await client.chat.completions.create(model=TEMPLATE, messages=history, stream=True)
            chunks = [c async for c in stream]
            await client.close()
            return whole.choices[0].message.content or "", chunks

        whole, chunks = asyncio.run(talk())
        assert whole == "echo: hi there"
        assert chunks[0].choices[0].delta.role == "assistant"
        pieces = [c.choices[0].delta.content for c in chunks if c.choices[0].delta.content]
        assert "".join(pieces) == "echo: tell me a long story"
        assert len(pieces) > 1  # written as the model streams it, not in one piece at the end
        assert [c.choices[0].finish_reason for c in chunks][-1] == "stop"
        assert all(c.object == "chat.completion.chunk" and c.id == chunks[0].id for c in chunks)
        assert all(not c.choices[0].delta.tool_calls for c in chunks)  # memory tool calls stay inside
        assert server.user_messages("companion-u7") == ["hi there", "tell me a long story"]


@pytest.mark.parametrize("stream", ["ignore", "refuse"])
def test_a_model_server_that_ignores_or_refuses_stream_still_streams_the_reply(tmp_path, sqlite_url, stream):
    with served(tmp_path, sqlite_url, stream=stream) as server:  # no keys: a loopback daemon
        client = openai.OpenAI(base_url=server.url, api_key="anything", max_retries=0)
        chunks = list(client.chat.completions.create(model=TEMPLATE, messages=[say("hello")], user="u9", stream=True))
        assert "".join(c.choices[0].delta.content or "" for c in chunks) == "echo: hello"
        assert chunks[-1].choices[0].finish_reason == "stop"


def test_keys_reach_their_own_users_agents_only(tmp_path, sqlite_url):
    with served(tmp_path, sqlite_url, users=("alice", "bob")) as server:
        as_alice = openai.OpenAI(base_url=server.url, api_key=server.keys["alice"], max_retries=0)
        as_bob = openai.OpenAI(base_url=server.url, api_key=server.keys["bob"], max_retries=0)
        admin = openai.OpenAI(base_url=server.url, api_key=server.keys["admin"], max_retries=0)
        as_alice.chat.completions.create(model=TEMPLATE, messages=[say("mine")])
        theirs, unknown = [
            _raises(openai.NotFoundError, as_bob, model=model, messages=[say("x")])
            for model in ("agent:companion-alice", "agent:companion-nobody")
        ]
        assert theirs["code"] == unknown["code"] == "model_not_found" and theirs["type"] == "invalid_request_error"
        assert theirs["message"].replace("alice", "nobody") == unknown["message"]  # nothing tells them apart
        other = _raises(openai.PermissionDeniedError, as_bob, model=TEMPLATE, messages=[say("x")], user="alice")
        assert (other["code"], other["param"], other["type"]) == ("other_user", "user", "permission_error")
        assert [m.id for m in as_bob.models.list()] == ["template:alice", "template:companion"]
        assert as_alice.models.retrieve("agent:companion-alice").owned_by == "alice"
        with pytest.raises(openai.NotFoundError):
            as_bob.models.retrieve("agent:companion-alice")
        # An admin names the end user: the field, or the X-Pagemind-User header.
        anyone = _raises(openai.BadRequestError, admin, model=TEMPLATE, messages=[say("x")])
        assert (anyone["code"], anyone["param"]) == ("user_required", "user")
        admin.chat.completions.create(model=TEMPLATE, messages=[say("for carol")], user="carol")
        admin.chat.completions.create(
            model=TEMPLATE, messages=[say("for dave@example.com")], extra_headers={"X-Pagemind-User": "dave@x.org"}
        )
        owners = {a.name: a.owner for a in server.daemon.list_agents() if a.template}
        assert owners["companion-carol"] == "carol" and "dave@x.org" in owners.values()
        assert {"agent:companion-carol", "agent:alice", "template:companion"} <= {m.id for m in admin.models.list()}
        nobody = openai.OpenAI(base_url=server.url, api_key="wrong", max_retries=0)
        denied = _raises(openai.AuthenticationError, nobody, model=TEMPLATE, messages=[say("x")])
        assert (denied["code"], denied["type"]) == ("unauthorized", "authentication_error")


def test_what_the_proxy_refuses_answers_in_openais_error_shape(tmp_path, sqlite_url):
    with served(tmp_path, sqlite_url) as server:
        client = openai.OpenAI(base_url=server.url, api_key="anything", max_retries=0)
        cases = [
            ({"model": "gpt-4o", "messages": [say("x")]}, openai.NotFoundError, "model_not_found", "model"),
            ({"model": "template:nope", "messages": [say("x")], "user": "u"}, openai.NotFoundError, None, "model"),
            (
                {"model": TEMPLATE, "messages": [say("x"), answer("y")], "user": "u"},
                openai.BadRequestError,
                "no_new_message",
                "messages",
            ),
            (
                {"model": TEMPLATE, "messages": [say("x")], "user": "u", "tools": [_TOOL], "tool_choice": "auto!"},
                openai.BadRequestError,
                "invalid_tool_choice",
                "tool_choice",
            ),
            (
                {"model": TEMPLATE, "messages": [say("x")], "user": "u", "n": 2},
                openai.BadRequestError,
                "n_unsupported",
                "n",
            ),
            (
                {
                    "model": TEMPLATE,
                    "messages": [
                        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://x/y.png"}}]}
                    ],
                    "user": "u",
                },
                openai.BadRequestError,
                "unsupported_content",
                None,
            ),
            ({"model": TEMPLATE, "messages": [], "user": "u"}, openai.BadRequestError, "invalid_request", "messages"),
        ]
        for arguments, error, code, param in cases:
            body = _raises(error, client, **arguments)
            assert set(body) == {"message", "type", "param", "code"} and body["message"]
            assert code is None or body["code"] == code, body
            assert param is None or body["param"] == param, body
        assert "companion-u" not in {a.name for a in server.daemon.list_agents()}  # nothing was made for refusals


def test_the_limits_before_a_route_answer_in_openais_shape_too(tmp_path, sqlite_url):
    with served(tmp_path, sqlite_url, users=("u1",), max_body=2048, key_requests_per_minute=2) as server:
        client = openai.OpenAI(base_url=server.url, api_key=server.keys["u1"], max_retries=0)
        big = _raises(openai.APIStatusError, client, model=TEMPLATE, messages=[say("x" * 4000)])
        assert (big["code"], big["type"]) == ("too_large", "invalid_request_error")
        client.models.list()  # the key's second request this minute
        with pytest.raises(openai.RateLimitError) as limited:
            client.models.list()
        assert limited.value.body["code"] == "rate_limited" and limited.value.response.headers["retry-after"]


def refusing_model(body: dict) -> dict:
    """A model server that refuses every request (a 400 the client does not retry): every turn fails."""
    return {"error": {"message": "this model refuses", "type": "invalid_request_error", "param": None, "code": None}}


def test_a_failed_turn_is_a_500_the_sdk_does_not_resend(tmp_path, sqlite_url):
    with served(tmp_path, sqlite_url, answer=refusing_model) as server:
        client = openai.OpenAI(base_url=server.url, api_key="anything", max_retries=2)  # the SDK's retries on
        with pytest.raises(openai.InternalServerError) as failed:
            client.chat.completions.create(model=TEMPLATE, messages=[say("hello")], user="u1")
        assert failed.value.body["code"] == "run_failed" and "this model refuses" in failed.value.body["message"]
        assert failed.value.response.headers["x-should-retry"] == "false"
        with pytest.raises(openai.APIError) as streamed:
            list(client.chat.completions.create(model=TEMPLATE, messages=[say("again")], user="u1", stream=True))
        assert streamed.value.body["code"] == "run_failed"
        assert server.user_messages("companion-u1") == ["hello", "again"]  # each stored once, none resent


_TOOL = {"type": "function", "function": {"name": "f", "parameters": {"type": "object", "properties": {}}}}


def _raises(error: type[openai.APIStatusError], client: openai.OpenAI, **arguments) -> dict:
    with pytest.raises(error) as caught:
        client.chat.completions.create(**arguments)
    body = caught.value.body
    assert isinstance(body, dict)
    return body
