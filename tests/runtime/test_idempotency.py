"""Idempotent turns (issue 10, item 2): a key used again returns the first turn's result and stores nothing new;
a turn that failed before any step committed leaves nothing for a retry to double.

(A turn a crash interrupted, retried with its key, completes once: tests/crash/test_step_crash.py.)
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pagemind.runtime.agent import Agent
from pagemind.runtime.cli.main import build_parser
from pagemind.runtime.model.client import ModelRequest, ModelUnavailable
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.models import FunctionModel, by_purpose
from pagemind.runtime.testing.specs import build_spec
from pagemind.runtime.turn_start import IdempotencyKeyReused
from tests.support.turn_child import respond, spec_options

ROOT = Path(__file__).resolve().parents[2]


async def load(database_url: str, model: FunctionModel) -> tuple[Agent, StateStore]:
    store = StateStore(make_engine(database_url))
    return await Agent.load(build_spec(**spec_options()), model=model, store=store), store


def counts(store: StateStore, agent_id: int) -> tuple[int, int, int]:
    return store.message_count(agent_id), len(store.steps(agent_id)), len(store.block_history(agent_id))


async def test_the_same_key_returns_the_first_result_and_stores_nothing(database_url):
    model = FunctionModel(by_purpose(respond))
    agent, store = await load(database_url, model)
    first = await agent.run_turn("A message 1", idempotency_key="key-1")
    assert first.reply == "ok A-1"
    before, calls = counts(store, agent.record.id), len(model.requests)
    again = await agent.run_turn("A message 1", idempotency_key="key-1")
    assert (again.turn_id, again.reply, again.stop_reason, again.steps) == (
        first.turn_id,
        "ok A-1",
        first.stop_reason,
        2,
    )
    assert counts(store, agent.record.id) == before and len(model.requests) == calls
    # Another process (a fresh load) gets the same answer from the store.
    other, _ = await load(database_url, model)
    assert await other.send("A message 1", idempotency_key="key-1") == "ok A-1"
    assert counts(store, agent.record.id) == before
    assert await agent.send("A message 2", idempotency_key="key-2") == "ok A-2"  # a new key is a new turn


async def test_a_key_reused_for_another_message_is_refused(database_url):
    agent, store = await load(database_url, FunctionModel(by_purpose(respond)))
    await agent.send("A message 1", idempotency_key="key-1")
    before = counts(store, agent.record.id)
    with pytest.raises(IdempotencyKeyReused):
        await agent.send("A message 2", idempotency_key="key-1")
    assert counts(store, agent.record.id) == before


@pytest.mark.parametrize("key", [None, "key-1"])
async def test_a_retry_after_the_endpoint_was_down_does_not_double_the_message(database_url, key):
    down = {"now": True}

    def step(request: ModelRequest) -> dict:
        if down["now"]:
            raise ModelUnavailable("model endpoint unreachable: http://127.0.0.1:9/v1")
        return respond(request)

    agent, store = await load(database_url, FunctionModel(by_purpose(step)))
    with pytest.raises(ModelUnavailable):
        await agent.send("Hi, my name is Lin. message 1", idempotency_key=key)
    down["now"] = False
    assert await agent.send("Hi, my name is Lin. message 1", idempotency_key=key) == "ok Hi, my name is Lin.-1"
    users = [m.content for m in store.all_messages(agent.record.id) if m.role == "user"]
    assert users == ["Hi, my name is Lin. message 1"]
    fresh, _ = await load(database_url, FunctionModel(by_purpose(respond)))
    assert [m.content for m in fresh.window.messages if m.role == "user"] == users
    finals = [s for s in store.steps(agent.record.id) if s.stop_reason]
    assert len(finals) == 1


async def test_a_different_message_after_a_failed_turn_keeps_both(database_url):
    """The unanswered message was accepted: it stays (the model sees it), and the next one follows it."""
    down = {"now": True}

    def step(request: ModelRequest) -> dict:
        if down["now"]:
            raise ModelUnavailable("model endpoint unreachable")
        return respond(request)

    agent, store = await load(database_url, FunctionModel(by_purpose(step)))
    with pytest.raises(ModelUnavailable):
        await agent.send("A message 1")
    down["now"] = False
    assert await agent.send("A message 2") == "ok A-2"
    assert [m.content for m in store.all_messages(agent.record.id) if m.role == "user"] == [
        "A message 1",
        "A message 2",
    ]


def test_the_cli_takes_a_key_and_a_wait():
    args = build_parser().parse_args(["run", "tester", "-m", "hi", "--idempotency-key", "k1", "--wait", "5"])
    assert (args.idempotency_key, args.wait) == ("k1", 5.0)
    assert build_parser().parse_args(["chat", "tester"]).wait == 30.0


async def test_the_cli_answers_a_used_key_from_the_store_without_the_model(database_url, tmp_path):
    agent, store = await load(database_url, FunctionModel(by_purpose(respond)))
    await agent.send("A message 1", idempotency_key="cli-key")
    before = counts(store, agent.record.id)
    env = {
        **os.environ,
        "DATABASE_URL": database_url,
        "PAGEMIND_HOME": str(tmp_path),
        "OPENAI_API_KEY": "sk-test",
        "OPENAI_BASE_URL": "http://127.0.0.1:9/v1",
    }  # nothing answers there
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pagemind.runtime.cli.main",
            "run",
            "tester",
            "-m",
            "A message 1",
            "--idempotency-key",
            "cli-key",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "ok A-1"
    assert counts(store, agent.record.id) == before
