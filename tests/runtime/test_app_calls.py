"""The loop with an app's own tools (`runtime.app_calls`): a step that calls one pauses the turn (the `Paused`
outcome) after running its own calls; the app's results resume it; a run again with the pausing run's key answers
nothing; a new message while calls are open stores a result saying the app sent none."""

from __future__ import annotations

import pytest

from pagemind.runtime.app_calls import NO_RESULT, AppTools, NothingToResume
from pagemind.runtime.loop import next_action, run_turn
from pagemind.runtime.messages import encode_json
from pagemind.runtime.model.request import ModelRequest
from pagemind.runtime.pressure.history_repair import is_valid
from pagemind.runtime.testing.responses import call, tool_calls_body
from pagemind.runtime.testing.responses import tool_call_body as tool_call
from pagemind.runtime.turn_outcomes import StopReason

WEATHER = {
    "type": "function",
    "function": {"name": "get_weather", "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}},
}
APP = AppTools((WEATHER,))


@pytest.mark.parametrize("terminal_ok, step", [(False, 1), (True, 1), (False, 4)])
def test_the_apps_calls_pause_the_turn_whatever_else_the_step_did(terminal_ok, step):
    assert next_action(True, terminal_ok, step, 4, app_calls=True) is StopReason.APP_TOOL_CALLS


async def test_a_mixed_step_pauses_then_the_apps_result_resumes_the_turn(scripted_openai, make_agent, database_url):
    scripted_openai.add(
        tool_calls_body(
            call("core_memory_append", {"label": "human", "content": "Lives in Oslo."}),
            call("get_weather", {"city": "Oslo"}, call_id="call_w1"),
        ),
        tool_call("send_message", {"message": "12°C in Oslo."}),
    )
    agent = await make_agent(database_url, scripted_openai.client())
    paused = await run_turn(agent, "Weather?", "k1", app=APP)
    assert (paused.stop_reason, paused.reply, [c.id for c in paused.app_calls]) == (
        StopReason.APP_TOOL_CALLS,
        None,
        ["call_w1"],
    )
    assert agent.memory.get("human").value == "Lives in Oslo."  # the memory call ran and committed
    assert "get_weather" in {t["function"]["name"] for t in scripted_openai.requests[0]["tools"]}
    # Run again with the same key (a crash before the run's finish): the paused turn as stored, nothing answered.
    again = await run_turn(agent, "Weather?", "k1", app=APP)
    assert (again.turn_id, [c.id for c in again.app_calls]) == (paused.turn_id, ["call_w1"])
    assert not [m for m in agent.window.messages if m.tool_call_id == "call_w1"]
    resumed = await run_turn(agent, "", "k2", app=AppTools((WEATHER,), {"call_w1": "12°C"}))
    assert (resumed.turn_id, resumed.reply, resumed.stop_reason) == (paused.turn_id, "12°C in Oslo.", "send_message")
    last_request = scripted_openai.requests[-1]["messages"]
    assert {"role": "tool", "content": "12°C", "tool_call_id": "call_w1"} in last_request
    # The same results again (no key): the turn as stored, nothing stored twice.
    retried = await run_turn(agent, "", None, app=AppTools((WEATHER,), {"call_w1": "12°C"}))
    assert (retried.turn_id, retried.reply) == (paused.turn_id, "12°C in Oslo.")
    stored = agent.store.all_messages(agent.record.id)
    assert [m.content for m in stored if m.tool_call_id == "call_w1"] == ["12°C"]
    assert [m.content for m in stored if m.role == "user"] == ["Weather?"]
    with pytest.raises(NothingToResume):
        await run_turn(agent, "", None, app=AppTools((WEATHER,), {"call_nobody": "x"}))


async def test_a_new_message_while_calls_are_open_answers_them_first(scripted_openai, make_agent, sqlite_url):
    scripted_openai.add(
        tool_call("get_weather", {"city": "Oslo"}, call_id="call_w2"),
        tool_call("send_message", {"message": "Sure."}),
    )
    agent = await make_agent(sqlite_url, scripted_openai.client())
    await run_turn(agent, "Weather?", app=APP)
    assert not is_valid(agent.window.messages)  # the open call, until a run answers it
    done = await run_turn(agent, "Never mind.")  # no app tools at all: any turn answers open calls first
    assert done.reply == "Sure."
    assert is_valid(agent.window.messages)
    [answered] = [m for m in agent.window.messages if m.tool_call_id == "call_w2"]
    assert (answered.content, answered.is_error, answered.name) == (NO_RESULT, True, "get_weather")
    roles = [m["role"] for m in scripted_openai.requests[-1]["messages"] if m["role"] != "system"]
    assert roles == ["user", "assistant", "tool", "user"]  # the result before the new message


async def test_an_app_tool_named_as_one_of_the_agents_is_not_offered(scripted_openai, make_agent, sqlite_url):
    scripted_openai.add(tool_call("send_message", {"message": "Hi."}))
    agent = await make_agent(sqlite_url, scripted_openai.client())
    clash = {"type": "function", "function": {"name": "send_message", "parameters": {"type": "object"}}}
    result = await run_turn(agent, "Hello", app=AppTools((clash, WEATHER)))
    assert (result.reply, result.stop_reason) == ("Hi.", StopReason.SEND_MESSAGE)  # the agent's own ran
    offered = [t["function"]["name"] for t in scripted_openai.requests[0]["tools"]]
    assert offered.count("send_message") == 1 and "get_weather" in offered


def test_a_forced_tool_choice_is_sent_and_its_bytes_are_the_bodys():
    forced = {"type": "function", "function": {"name": "get_weather"}}
    for choice, sent in ((forced, forced), (None, "auto")):
        request = ModelRequest("m", [{"role": "user", "content": "x"}], [WEATHER], 0.0, 10, tool_choice=choice)
        assert request.body()["tool_choice"] == sent
        assert request.encoded() == encode_json(request.body())
    assert AppTools((WEATHER,), forced="get_weather").tool_choice == forced
    assert AppTools((WEATHER,), forced="get_weather").chosen().tool_choice is None  # the first step's only
