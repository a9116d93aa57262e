"""Prompt-cache use reported (issue 37, item 2): the provider's cached prompt tokens are read from its usage, stored
per step, shown by `pagemind trace show` and `pagemind context`, summed per agent, and priced with `model.prices`."""

from __future__ import annotations

import json

import pytest

from pagemind.runtime.model.response import response_from_body
from pagemind.runtime.spec.prices import ModelPrices
from pagemind.runtime.testing.prompt_cache import PromptCache
from pagemind.runtime.testing.responses import reply_body, tool_call_body
from pagemind.runtime.testing.specs import build_spec

PRICES = {"input": 2.5, "cached_input": 1.25, "output": 10.0}


def with_usage(usage: dict) -> dict:
    return {**reply_body("hi"), "usage": usage}


def test_cached_tokens_are_read_from_openai_and_anthropic_style_usage():
    openai_style = {"prompt_tokens": 2000, "completion_tokens": 5, "prompt_tokens_details": {"cached_tokens": 1536}}
    assert response_from_body(with_usage(openai_style)).cached_tokens == 1536
    gateway = {"prompt_tokens": 2000, "completion_tokens": 5, "cache_read_input_tokens": 1024}
    assert response_from_body(with_usage(gateway)).cached_tokens == 1024
    silent = {"prompt_tokens": 2000, "completion_tokens": 5, "prompt_tokens_details": {"audio_tokens": 0}}
    assert response_from_body(with_usage(silent)).cached_tokens is None
    assert response_from_body(with_usage({"prompt_tokens": 9, "cached_tokens": "many"})).cached_tokens is None


def test_prices_cost_counts_cached_tokens_at_their_own_price():
    prices = ModelPrices.model_validate(PRICES)
    assert prices.cost(1_000_000, 0, 0) == pytest.approx(2.5)
    assert prices.cost(1_000_000, 400_000, 100_000) == pytest.approx(0.6 * 2.5 + 0.4 * 1.25 + 1.0)
    assert ModelPrices(input=3, output=15).cost(1_000_000, 1_000_000, 0) == pytest.approx(3.0)  # no cached price
    with pytest.raises(ValueError):
        ModelPrices.model_validate({"input": -1, "output": 1})


def test_prices_left_out_keep_the_spec_hash():
    """An agent stored before `model.prices` existed keeps its hash (it is not counted as edited)."""
    plain = build_spec()
    assert "prices" not in plain.fingerprint()["model"]
    with_prices = build_spec(model={"name": "gpt-4o-mini", "max_output_tokens": 256, "prices": PRICES})
    assert with_prices.model.prices == ModelPrices.model_validate(PRICES)
    assert with_prices.fingerprint()["model"]["prices"]["input"] == 2.5


def two_step_turns(request) -> dict:
    """An edit first, then the reply: two steps per turn, the second repeating the first's prompt and more."""
    last = [m for m in request.messages if m["role"] != "system"][-1]
    if last["role"] == "tool":
        return tool_call_body("send_message", {"message": "Noted."})
    return tool_call_body("core_memory_append", {"label": "human", "content": "x"})


async def test_steps_store_the_cached_tokens_and_the_agent_sums_them(make_agent, database_url):
    from pagemind.runtime.testing.models import FunctionModel, by_purpose

    model = FunctionModel(by_purpose(two_step_turns), prompt_cache=PromptCache())
    spec = build_spec(model={"name": "gpt-4o-mini", "max_output_tokens": 256, "prices": PRICES})
    agent = await make_agent(database_url, model, spec)
    await agent.send("Hi, I'm Lin.")
    await agent.send("I like tea.")
    steps = agent.store.steps(agent.record.id)
    assert len(steps) == 4 and all(s.cached_tokens is not None for s in steps)
    assert steps[1].cached_tokens > 0  # the turn's second step repeats the first one's prompt
    assert all(s.cached_tokens <= s.prompt_tokens for s in steps)
    usage = await agent.store.usage(agent.record.id)
    assert usage.steps == 4 and usage.steps_reporting_cache == 4
    assert usage.prompt_tokens == sum(s.prompt_tokens for s in steps)
    assert usage.cached_tokens == sum(s.cached_tokens for s in steps)
    assert 0 < usage.cached_share < 1


async def test_a_provider_that_reports_no_cache_stores_none(make_agent, sqlite_url):
    from pagemind.runtime.testing.models import ScriptedModel

    agent = await make_agent(sqlite_url, ScriptedModel([reply_body("Hello.")]))
    await agent.send("Hi")
    usage = await agent.store.usage(agent.record.id)
    assert [s.cached_tokens for s in agent.store.steps(agent.record.id)] == [None]
    assert usage.steps == 1 and usage.steps_reporting_cache == 0 and usage.cached_share is None


def test_trace_show_and_context_report_the_cache_and_the_cost(tmp_path, monkeypatch):
    """Through the CLI over HTTP (respx), the scripted endpoint imitating a provider's prompt cache."""
    import respx

    from pagemind.runtime.cli.main import main
    from pagemind.runtime.testing.endpoint import BASE_URL, TEST_API_KEY, ScriptedOpenAI

    spec = build_spec("cachey", model={"name": "gpt-4o-mini", "max_output_tokens": 256, "prices": PRICES})
    path = tmp_path / "cachey.yaml"
    path.write_text(json.dumps(spec.model_dump(mode="json", by_alias=True, exclude_defaults=True)))
    monkeypatch.setenv("OPENAI_BASE_URL", BASE_URL)
    monkeypatch.setenv("OPENAI_API_KEY", TEST_API_KEY)
    provider = ScriptedOpenAI(prompt_cache=PromptCache())
    provider.add(tool_call_body("core_memory_append", {"label": "human", "content": "Lin"}))
    provider.add(tool_call_body("send_message", {"message": "Hello Lin."}))
    with respx.mock(base_url=BASE_URL, assert_all_called=False) as router:
        router.post("/chat/completions").mock(side_effect=provider.handle)
        trace = tmp_path / "turn.jsonl"
        assert main(["run", str(path), "-m", "Hi, I'm Lin.", "--trace", str(trace)]) == 0
    assert len(provider.requests) == 2

    lines = capture(main, ["trace", "show", str(trace)])
    assert any(" cached" in line and "tokens" in line for line in lines)
    usage = next(line for line in lines if line.startswith("usage:"))
    assert "2 model calls" in usage and "from the prompt cache" in usage and "about $" in usage

    context = capture(main, ["context", "cachey"])
    assert any(line.startswith("usage: 2 steps") and "about $" in line for line in context)
    report = json.loads("\n".join(capture(main, ["context", "cachey", "--json"])))
    assert report["usage"]["steps"] == 2 and report["usage"]["cached_tokens"] > 0
    assert report["usage"]["cost_usd"] > 0


def capture(main, argv: list[str]) -> list[str]:
    import contextlib
    import io

    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        assert main(argv) == 0
    return buffer.getvalue().splitlines()
