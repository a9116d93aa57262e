import httpx
import pytest

from pagemind.runtime.model.client import (
    ContextLengthExceeded,
    ModelRequest,
    ModelRequestRejected,
    ModelUnavailable,
    NoModelConfigured,
    OpenAIModelClient,
)
from pagemind.runtime.spec.agent import ModelSpec
from pagemind.runtime.testing.endpoint import TEST_API_KEY, http_error
from pagemind.runtime.testing.responses import reply_body as reply
from pagemind.runtime.testing.responses import tool_call_body as tool_call

REQUEST = ModelRequest("gpt-4o-mini", [{"role": "user", "content": "hi"}], [], 0.5, 100)


async def test_429_then_success_honours_retry_after(scripted_openai):
    scripted_openai.add(http_error(429, "slow down", headers={"retry-after": "7"}), reply("hello"))
    response = await scripted_openai.client().complete(REQUEST)
    assert response.content == "hello"
    assert scripted_openai.sleeps == [7.0]
    assert len(scripted_openai.requests) == 2


async def test_500_every_time_gives_a_clear_error_after_n_attempts(scripted_openai):
    scripted_openai.add(*[http_error(500, "down")] * 3)
    with pytest.raises(ModelUnavailable, match="failed 3 times; last: HTTP 500"):
        await scripted_openai.client(max_attempts=3).complete(REQUEST)
    assert len(scripted_openai.sleeps) == 2
    assert all(0 <= s <= 30 for s in scripted_openai.sleeps)


async def test_timeout_is_retried(scripted_openai):
    scripted_openai.add(httpx.ReadTimeout("slow"), tool_call("send_message", {"message": "hi"}))
    response = await scripted_openai.client().complete(REQUEST)
    assert response.tool_calls[0].name == "send_message"
    assert len(scripted_openai.sleeps) == 1


async def test_connection_errors_exhaust_into_model_unavailable(scripted_openai):
    scripted_openai.add(*[httpx.ConnectError("refused")] * 2)
    with pytest.raises(ModelUnavailable, match="unreachable after 2 attempts"):
        await scripted_openai.client(max_attempts=2).complete(REQUEST)


async def test_400_is_not_retried(scripted_openai):
    scripted_openai.add(http_error(400, "bad temperature"))
    with pytest.raises(ModelRequestRejected, match="HTTP 400"):
        await scripted_openai.client().complete(REQUEST)
    assert scripted_openai.sleeps == [] and len(scripted_openai.requests) == 1


async def test_context_length_exceeded_is_typed(scripted_openai):
    scripted_openai.add(
        http_error(400, "This model's maximum context length is 2048 tokens.", code="context_length_exceeded")
    )
    with pytest.raises(ContextLengthExceeded):
        await scripted_openai.client().complete(REQUEST)


async def test_request_carries_model_parameters_and_auth(scripted_openai):
    scripted_openai.add(reply("ok"))
    tools = [{"type": "function", "function": {"name": "f", "description": "d", "parameters": {"type": "object"}}}]
    await scripted_openai.client().complete(ModelRequest("m1", [{"role": "user", "content": "x"}], tools, 0.3, 77))
    body = scripted_openai.requests[0]
    assert (body["model"], body["temperature"], body["max_tokens"], body["tool_choice"]) == ("m1", 0.3, 77, "auto")
    assert scripted_openai.headers[0]["authorization"] == f"Bearer {TEST_API_KEY}"


def test_no_endpoint_configured_says_how_to_fix():
    with pytest.raises(NoModelConfigured, match="Set OPENAI_API_KEY.*OPENAI_BASE_URL"):
        OpenAIModelClient.from_spec(ModelSpec(name="m"), environ={})
    client = OpenAIModelClient.from_spec(ModelSpec(name="m"), environ={"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"})
    assert str(client.client.base_url).startswith("http://127.0.0.1:9/v1")


def test_missing_call_ids_are_made_unique():
    from pagemind.runtime.model.client import response_from_body

    body = {
        "choices": [
            {
                "message": {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {"type": "function", "function": {"name": "f", "arguments": "{}"}},
                        {"type": "function", "function": {"name": "g", "arguments": "{}"}},
                    ],
                }
            }
        ]
    }
    ids = [c.id for c in response_from_body(body).tool_calls] + [c.id for c in response_from_body(body).tool_calls]
    assert len(set(ids)) == 4
