"""A turn watched live: the agent asks the model to stream only when its observer wants the reply's pieces; the
pieces come before the response and make the reply; a streamed step that does not end the turn is reset; the
trace of a streamed turn holds no pieces and replays identically (the real OpenAI client, respx behind it)."""

from __future__ import annotations

from pagemind.runtime.events import ModelResponseEvent, ReplyDeltaEvent, ReplyResetEvent, StepEndEvent
from pagemind.runtime.loop import run_turn
from pagemind.runtime.observer import ObserverGroup, wants_deltas
from pagemind.runtime.testing.responses import call, reply_body, tool_call_body, tool_calls_body
from pagemind.runtime.trace.reader import read_trace
from pagemind.runtime.trace.recorder import record
from pagemind.runtime.trace.replay import replay
from tests.runtime.model.test_model_stream import TRICKY, Watcher


class Quiet:
    """An observer that does not ask for the pieces."""

    def __init__(self) -> None:
        self.events: list = []

    def on_event(self, event) -> None:
        self.events.append(event)


def turn_script():
    return [
        tool_call_body("core_memory_append", {"label": "human", "content": "Lin."}),
        tool_call_body("send_message", {"message": TRICKY}),
    ]


async def test_a_watched_turn_streams_its_reply_before_the_response(scripted_openai, make_agent, sqlite_url):
    scripted_openai.add(*turn_script())
    agent = await make_agent(sqlite_url, scripted_openai.client())
    agent.observer = watcher = Watcher()
    result = await run_turn(agent, "Hi, I'm Lin.")
    assert result.reply == TRICKY and watcher.held() == TRICKY
    assert all(r.get("stream") is True for r in scripted_openai.requests)
    kinds = [type(e) for e in watcher.events]
    last_delta = max(i for i, kind in enumerate(kinds) if kind is ReplyDeltaEvent)
    response = next(i for i in range(last_delta, len(kinds)) if kinds[i] is ModelResponseEvent)
    assert {e.step for e in watcher.events if isinstance(e, ReplyDeltaEvent)} == {2} and response > last_delta
    assert not watcher.resets()


async def test_nobody_watching_means_no_streaming(scripted_openai, make_agent, sqlite_url):
    scripted_openai.add(*turn_script())
    agent = await make_agent(sqlite_url, scripted_openai.client())
    agent.observer = quiet = Quiet()
    assert not wants_deltas(quiet) and wants_deltas(ObserverGroup([quiet, Watcher()]))
    assert (await run_turn(agent, "Hi, I'm Lin.")).reply == TRICKY
    assert not any("stream" in r for r in scripted_openai.requests)
    assert not any(isinstance(e, (ReplyDeltaEvent, ReplyResetEvent)) for e in quiet.events)


async def test_a_streamed_reply_that_fails_is_reset_and_the_next_step_streams_anew(
    scripted_openai, make_agent, sqlite_url
):
    scripted_openai.add(
        tool_call_body("send_message", '{"message": "Half a repl'),  # unparseable: a tool error
        tool_calls_body(call("send_message", {"message": "The real reply."}), content="Oops."),
    )
    agent = await make_agent(sqlite_url, scripted_openai.client())
    agent.observer = watcher = Watcher()
    assert (await run_turn(agent, "hello")).reply == "The real reply."
    assert watcher.held() == "The real reply."
    assert watcher.resets() == [
        "the streamed text did not end the turn",
        "the model's text came with a tool call: it was not the reply",
    ]
    reset = next(e for e in watcher.events if isinstance(e, ReplyResetEvent))
    first_end = next(e for e in watcher.events if isinstance(e, StepEndEvent))
    assert reset.step == first_end.step == 1
    assert watcher.events.index(reset) < watcher.events.index(first_end)


async def test_a_plain_answer_streams_as_content(scripted_openai, make_agent, sqlite_url):
    scripted_openai.add(reply_body("Plain words."))
    agent = await make_agent(sqlite_url, scripted_openai.client())
    agent.observer = watcher = Watcher()
    assert (await run_turn(agent, "hello")).reply == "Plain words." == watcher.held()


async def test_a_streamed_turn_records_the_same_trace_and_replays_identically(
    scripted_openai, make_agent, sqlite_url, tmp_path
):
    script = turn_script()
    scripted_openai.add(*script)
    agent = await make_agent(sqlite_url, scripted_openai.client())
    agent.observer = watcher = Watcher()
    recorder = record(agent, path=tmp_path / "streamed.jsonl")
    await run_turn(agent, "Hi, I'm Lin.")
    recorder.close()
    assert any(isinstance(e, ReplyDeltaEvent) for e in watcher.events)
    trace = read_trace(tmp_path / "streamed.jsonl")
    assert not any(isinstance(e, (ReplyDeltaEvent, ReplyResetEvent)) for e in trace.events)
    bodies = [e.body for e in trace.events if isinstance(e, ModelResponseEvent)]
    assert bodies == script  # what a non-streaming answer would have recorded
    assert all("stream" not in e.body for e in trace.events if e.type == "model_request")
    assert (await replay(trace)).status == "identical"
