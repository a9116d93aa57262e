import pytest
import sqlalchemy

from pagemind.runtime.agent import Agent
from pagemind.runtime.loop import next_action, run_turn
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.responses import call, tool_calls_body
from pagemind.runtime.testing.responses import reply_body as reply
from pagemind.runtime.testing.responses import tool_call_body as tool_call
from pagemind.runtime.turn_outcomes import StopReason


@pytest.mark.parametrize(
    "has_calls, terminal_ok, step, max_steps, expected",
    [
        (False, False, 1, 4, StopReason.PLAIN_REPLY),
        (False, False, 4, 4, StopReason.PLAIN_REPLY),
        (True, True, 1, 4, StopReason.SEND_MESSAGE),
        (True, True, 4, 4, StopReason.SEND_MESSAGE),
        (True, False, 1, 4, None),
        (True, False, 3, 4, None),
        (True, False, 4, 4, StopReason.MAX_STEPS),
        (True, False, 1, 1, StopReason.MAX_STEPS),
    ],
)
def test_next_action_table(has_calls, terminal_ok, step, max_steps, expected):
    assert next_action(has_calls, terminal_ok, step, max_steps) is expected


async def test_append_then_send_message_end_to_end(scripted_openai, make_agent, database_url):
    scripted_openai.add(
        tool_call("core_memory_append", {"label": "human", "content": "Name: Lin. Allergic to peanuts."}),
        tool_call("send_message", {"message": "Nice to meet you, Lin!"}),
    )
    agent = await make_agent(database_url, scripted_openai.client())
    result = await run_turn(agent, "Hi, I'm Lin. I'm allergic to peanuts.")

    assert (result.reply, result.stop_reason, result.steps) == ("Nice to meet you, Lin!", StopReason.SEND_MESSAGE, 2)
    assert agent.memory.get("human").value == "Name: Lin. Allergic to peanuts."
    # The second request shows the model its own edit and the tool result.
    second = scripted_openai.requests[1]["messages"]
    assert "Allergic to peanuts" in second[0]["content"]
    assert [m["role"] for m in second[1:]] == ["user", "assistant", "tool", "system"]

    fresh = await Agent.load(agent.spec, store=StateStore(make_engine(database_url)))
    assert fresh.memory.get("human").value == "Name: Lin. Allergic to peanuts."
    assert [(m.role, m.tool_calls[0].name if m.tool_calls else m.content) for m in fresh.window.messages] == [
        ("user", "Hi, I'm Lin. I'm allergic to peanuts."),
        ("assistant", "core_memory_append"),
        ("tool", "Appended. Block 'human' now holds 31/100 characters."),
        ("assistant", "send_message"),
        ("tool", "Nice to meet you, Lin!"),
    ]
    [version] = fresh.store.block_history(fresh.record.id, "human")
    assert (version.old_value, version.operation) == ("", "append") and version.step_id is not None
    assert [s.stop_reason for s in fresh.store.steps(fresh.record.id)] == [None, "send_message"]


async def test_plain_reply_ends_the_turn(scripted_openai, make_agent, sqlite_url):
    scripted_openai.add(reply("Just text."))
    result = await run_turn(await make_agent(sqlite_url, scripted_openai.client()), "hello")
    assert (result.reply, result.stop_reason, result.steps) == ("Just text.", StopReason.PLAIN_REPLY, 1)


async def test_max_steps_stops_a_model_that_never_stops(scripted_openai, make_agent, sqlite_url):
    scripted_openai.add(*[tool_call("core_memory_append", {"label": "human", "content": "x"})] * 4)
    agent = await make_agent(sqlite_url, scripted_openai.client())
    result = await run_turn(agent, "loop forever")
    assert (result.stop_reason, result.steps, result.reply) == (StopReason.MAX_STEPS, 4, None)


async def test_errors_go_back_to_the_model_and_the_turn_goes_on(scripted_openai, make_agent, sqlite_url):
    scripted_openai.add(
        tool_call("core_memory_append", '{"label": "human", "content": '),  # broken JSON
        tool_call("teleport", {"to": "mars"}),  # unknown tool
        tool_call("core_memory_append", {"label": "human", "content": "y" * 500}),  # over the limit
        tool_call("send_message", {"message": "Sorry, done."}),
    )
    agent = await make_agent(sqlite_url, scripted_openai.client())
    result = await run_turn(agent, "try things")
    assert result.stop_reason is StopReason.SEND_MESSAGE
    errors = [m.content for m in result.messages if m.role == "tool" and m.is_error]
    assert len(errors) == 3
    assert "not valid JSON" in errors[0] and "unknown tool 'teleport'" in errors[1] and "limit is 100" in errors[2]
    last_request = scripted_openai.requests[-1]["messages"]
    assert any(m["role"] == "tool" and "limit is 100" in m["content"] for m in last_request)
    assert agent.memory.get("human").value == ""


async def test_several_tool_calls_in_one_response_are_all_dispatched_in_order(scripted_openai, make_agent, sqlite_url):
    scripted_openai.add(
        tool_calls_body(
            call("core_memory_append", {"label": "human", "content": "A"}),
            call("core_memory_append", {"label": "human", "content": "B"}),
            call("send_message", {"message": "ok"}),
        )
    )
    agent = await make_agent(sqlite_url, scripted_openai.client())
    result = await run_turn(agent, "two facts")
    assert agent.memory.get("human").value == "A\nB"
    tool_ids = [m.tool_call_id for m in result.messages if m.role == "tool"]
    assert tool_ids == [c.id for c in result.messages[1].tool_calls]


def _dump(url: str) -> dict[str, list]:
    engine = sqlalchemy.create_engine(url)
    with engine.connect() as conn:
        return {
            t: sorted(map(tuple, conn.execute(sqlalchemy.text(f"SELECT * FROM {t}")).fetchall()), key=str)
            for t in ("agents", "blocks", "block_versions", "messages", "steps")
        }


async def test_exception_between_model_call_and_commit_leaves_database_as_before_the_step(
    scripted_openai, make_agent, database_url
):
    # The edit's step is held for the reply's commit (`runtime.loop`): that commit fails, and takes both.
    scripted_openai.add(
        tool_call("core_memory_append", {"label": "human", "content": "Lin"}),
        tool_call("send_message", {"message": "noted"}),
    )
    agent = await make_agent(database_url, scripted_openai.client())
    original_commit = agent.store.commit_steps
    snapshots = {}

    async def failing_commit(*args, **kwargs):
        snapshots["before"] = _dump(database_url)
        raise RuntimeError("power cut")

    agent.store.commit_steps = failing_commit
    with pytest.raises(RuntimeError, match="power cut"):
        await run_turn(agent, "remember me")
    assert _dump(database_url) == snapshots["before"]
    assert agent.memory.get("human").value == ""  # the in-memory state did not move either
    assert [m.role for m in agent.window.messages] == ["user"]  # the accepted message is kept

    agent.store.commit_steps = original_commit
    scripted_openai.add(tool_call("send_message", {"message": "back"}))
    assert (await run_turn(agent, "again")).reply == "back"
