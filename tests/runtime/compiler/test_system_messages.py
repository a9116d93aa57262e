"""`model.system_messages: first_only`: a prompt with one system message, the first, rendered by real chat templates
(tests/fixtures/chat_templates: Gemma's and Mistral's, which refuse a system message after the first) with
Jinja2 as serving stacks render them; the default prompt, with its closing system message and a pressure alert,
is refused by the same templates."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from jinja2 import TemplateError
from jinja2.sandbox import ImmutableSandboxedEnvironment

from pagemind.blocks import Block
from pagemind.runtime.compiler import NOTE_TAG, ContextInputs, MemoryStats, compile_context, fold_system_messages
from pagemind.runtime.loop import run_turn
from pagemind.runtime.messages import Message
from pagemind.runtime.model.client import ModelRequest
from pagemind.runtime.pressure.monitor import WARNING_TEXT
from pagemind.runtime.spec.agent import AgentSpec, ModelSpec
from pagemind.runtime.testing.models import FunctionModel, by_purpose
from pagemind.runtime.testing.responses import tool_call_body
from pagemind.runtime.testing.specs import spec_data
from pagemind.tools import ToolCall

TEMPLATES = Path(__file__).parents[2] / "fixtures" / "chat_templates"
T = datetime(2026, 11, 29, 15, 4, tzinfo=UTC)
ALERT = WARNING_TEXT.format(percent=72)


def render(template: str, messages: list[dict[str, Any]]) -> str:
    """The prompt text a serving stack would make (transformers' `apply_chat_template` settings)."""
    config = json.loads((TEMPLATES / f"{template}.json").read_text(encoding="utf-8"))

    def raise_exception(message: str) -> None:
        raise TemplateError(message)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.globals["raise_exception"] = raise_exception
    return env.from_string(config["chat_template"]).render(
        messages=messages, bos_token=config["bos_token"], eos_token=config["eos_token"], add_generation_prompt=True
    )


def prompt(mode: str, *messages: Message) -> list[dict[str, Any]]:
    inputs = ContextInputs(
        system="You are a companion.",
        blocks=(
            Block("human", "Name: Lin", 500, "The user."),
            Block("constraints", "Never suggest peanuts.", 200, "Hard rules.", read_only=True),
        ),
        messages=messages,
        stats=MemoryStats(T, recall_count=12, in_context_count=len(messages)),
        system_messages=mode,  # type: ignore[arg-type]  # the tests pass the YAML's spelling, checked by ModelSpec
    )
    return compile_context(inputs).messages


PLAIN = (  # a turn answered in plain content, then a new message with the pressure alert after it
    Message("user", "Hi!", T),
    Message("assistant", "Hello Lin.", T),
    Message("user", "I moved to Oslo.", T),
    Message("system", ALERT, T),
)
TOOLS = (  # a turn whose reply went through a tool call (Mistral's ids are 9 characters)
    Message("user", "Hi!", T),
    Message("assistant", None, T, tool_calls=(ToolCall("a1b2c3d4e", "core_memory_append", '{"label": "human"}'),)),
    Message("tool", "ok", T, tool_call_id="a1b2c3d4e", name="core_memory_append"),
)


@pytest.mark.parametrize(
    ("template", "window", "refusal"),
    [
        ("gemma-3-it", PLAIN, "Conversation roles must alternate"),
        ("mistral-7b-instruct-v0.3", PLAIN, "roles must alternate"),
        ("mistral-7b-instruct-v0.3", TOOLS, "Only user and assistant roles are supported"),
    ],
)
def test_the_default_prompt_is_refused_and_first_only_renders(template, window, refusal):
    with pytest.raises(TemplateError, match=refusal):
        render(template, prompt("any", *window))
    messages = prompt("first_only", *window)
    assert [m["role"] for m in messages].count("system") == 1 and messages[0]["role"] == "system"
    text = render(template, messages)
    assert "Never suggest peanuts." in text and f"<{NOTE_TAG}>" in text  # the rules pinned, and restated
    assert "Current time: 2026-11-29 15:04" in text  # the closing message's content is all there


def test_gemma_2_refuses_any_system_message_which_first_only_does_not_change():
    with pytest.raises(TemplateError, match="System role not supported"):
        render("gemma-2-it", prompt("first_only", *PLAIN))


def test_the_notes_go_to_the_latest_user_message_so_earlier_turns_keep_their_prefix():
    messages = prompt("first_only", *PLAIN)
    first, reply, latest = messages[1:]
    assert first == {"role": "user", "content": "Hi!"} and reply["content"] == "Hello Lin."
    alert_at, closing_at = latest["content"].index(ALERT), latest["content"].index("<memory_stats>")
    assert latest["content"].startswith("I moved to Oslo.") and alert_at < closing_at  # in the prompt's order
    # The system message is the default prompt's, unchanged: the prefix the provider cached stays valid.
    assert messages[0] == prompt("any", *PLAIN)[0]
    # A step later (the turn's tool exchange appended), everything before the latest user message is the same.
    later = prompt("first_only", *PLAIN, *TOOLS[1:])
    assert later[:3] == messages[:3] and later[3]["content"].startswith(latest["content"].split("<memory_stats>")[0])


def test_notes_with_no_user_message_before_them_wait_for_the_next_one_or_go_to_the_first_message():
    wire = [
        {"role": "system", "content": "S"},
        {"role": "system", "content": "alert"},
        {"role": "assistant", "content": "a"},
        {"role": "user", "content": "u"},
        {"role": "system", "content": "closing"},
    ]
    assert fold_system_messages(wire) == [
        {"role": "system", "content": "S"},
        {"role": "assistant", "content": "a"},
        {"role": "user", "content": f"<{NOTE_TAG}>\nalert\n</{NOTE_TAG}>\n\nu\n\n<{NOTE_TAG}>\nclosing\n</{NOTE_TAG}>"},
    ]
    alone = fold_system_messages([{"role": "system", "content": "S"}, {"role": "system", "content": "closing"}])
    assert alone == [{"role": "system", "content": f"S\n\n<{NOTE_TAG}>\nclosing\n</{NOTE_TAG}>"}]


def test_the_spec_field_defaults_to_any_and_leaves_stored_agents_fingerprints_alone():
    assert ModelSpec(name="m").system_messages == "any"
    assert ModelSpec(name="m", system_messages="first_only").system_messages == "first_only"
    assert "system_messages" not in ModelSpec(name="m").model_dump(exclude={"system_messages"})
    with pytest.raises(ValueError, match="system_messages"):
        ModelSpec.model_validate({"name": "m", "system_messages": "none"})


async def test_an_agent_whose_model_takes_one_system_message_sends_one(make_agent, sqlite_url):
    seen: list[list[dict[str, Any]]] = []

    def step(request: ModelRequest) -> dict[str, Any]:
        seen.append(request.messages)
        return tool_call_body("send_message", {"message": "Hello."})

    data = spec_data("gemma")
    data["model"]["system_messages"] = "first_only"
    agent = await make_agent(sqlite_url, FunctionModel(by_purpose(step)), AgentSpec.model_validate(data))
    assert (await run_turn(agent, "Hi!")).reply == "Hello."
    [messages] = seen
    assert [m["role"] for m in messages] == ["system", "user"]
    assert messages[1]["content"].startswith("Hi!\n\n<system_note>\n<memory_stats>")
    render("gemma-3-it", messages)  # renders
