"""A strict provider rejects `content: null` with HTTP 400, as some OpenAI-compatible servers do. An unusable
response must leave nothing behind that such a provider rejects later, and a history already holding that shape is
repaired, so the agent is never bricked (issue 10, item 4). Also: a provider's context overflow, repeated."""

from __future__ import annotations

import uuid

import httpx
import openai
import pytest
import respx

from pagemind.runtime.messages import Message
from pagemind.runtime.model.client import ContextLengthExceeded, ModelBadResponse, OpenAIModelClient
from pagemind.runtime.state.records import StepRecord
from pagemind.runtime.testing.endpoint import BASE_URL, ScriptedOpenAI, http_error
from pagemind.runtime.testing.responses import reply_body


@pytest.fixture
def strict():
    provider = ScriptedOpenAI(strict=True)
    with respx.mock(base_url=BASE_URL, assert_all_called=False) as router:
        router.post("/chat/completions").mock(side_effect=provider.handle)
        yield provider
    assert not provider.script, "scripted responses left unused"


async def no_sleep(seconds: float) -> None:
    pass


def openai_client(max_attempts: int = 3) -> OpenAIModelClient:
    """The real client against the strict provider; backoff is not slept."""
    sdk = openai.AsyncOpenAI(api_key="k", base_url=BASE_URL, max_retries=0)
    return OpenAIModelClient(sdk, max_attempts=max_attempts, sleep=no_sleep)


EMPTY_CHOICES = httpx.Response(200, json={"id": "x", "object": "chat.completion", "choices": []})


async def test_empty_choices_store_nothing_and_the_next_turn_is_accepted(strict, make_agent, database_url):
    strict.script += [EMPTY_CHOICES] * 3
    agent = await make_agent(database_url, openai_client())
    with pytest.raises(ModelBadResponse, match="no choices"):
        await agent.send("Hi, I'm Lin.")
    assert [m.role for m in agent.store.all_messages(agent.record.id)] == ["user"]

    strict.script.append(reply_body("Hello Lin."))
    assert await agent.send("Hello?") == "Hello Lin."
    assert strict.rejected == 0


async def test_a_stored_null_assistant_message_is_repaired_out_of_the_window(strict, make_agent, database_url):
    """The shape the old client stored from an empty `choices`: repair takes it out of view (it stays in recall)."""
    agent = await make_agent(database_url, openai_client())
    turn = uuid.uuid4().hex
    await agent.window.accept(Message("user", "Hi, I'm Lin.", agent.now(), turn_id=turn))
    record = StepRecord(turn, 1, "m", None, None, "plain_reply", agent.now(), 0.0, 0.0)
    await agent.window.commit_step(record, [Message("assistant", None, agent.now(), turn_id=turn)], [])

    reloaded = await make_agent(database_url, openai_client())
    strict.script.append(reply_body("Hello Lin."))
    assert await reloaded.send("Hello?") == "Hello Lin."
    assert strict.rejected == 0
    assert [m.content for m in reloaded.window.messages] == ["Hi, I'm Lin.", "Hello?", "Hello Lin."]
    stored = reloaded.store.all_messages(reloaded.record.id)
    assert [(m.role, m.content) for m in stored][:2] == [("user", "Hi, I'm Lin."), ("assistant", None)]


async def test_context_length_exceeded_repeated_fails_the_turn_cleanly(scripted_openai, make_agent, sqlite_url):
    overflow = http_error(400, "This model's maximum context length is 8192 tokens.", code="context_length_exceeded")
    scripted_openai.add(overflow, overflow)  # the step, then its one retry after the forced flush
    agent = await make_agent(sqlite_url, scripted_openai.client())
    with pytest.raises(ContextLengthExceeded):
        await agent.send("Hi, I'm Lin.")
    assert len(scripted_openai.requests) == 2
    assert [m.role for m in agent.window.messages] == ["user"]

    scripted_openai.add(reply_body("Hello Lin."))
    assert await agent.send("Hello?") == "Hello Lin."
