"""The events a daemon keeps of a run in flight, for subscribers that come late (`scheduler.streams.fanout`): every event,
in order, but no model request's or response's body (a step's whole prompt, otherwise held until the run ends).
A late subscriber sees the same stream as one that was there from the start."""

from __future__ import annotations

from pagemind.runtime.events import (
    ModelRequestEvent,
    ModelResponseEvent,
    StepEndEvent,
    ToolCallEvent,
    TurnEvent,
    without_body,
)
from pagemind.scheduler.api.sse import SseMapper
from pagemind.scheduler.streams.fanout import RunFanout
from pagemind.scheduler.streams.relay import first_seq

PROMPT = {"model": "m", "messages": [{"role": "system", "content": "x" * 200_000}, {"role": "user", "content": "hi"}]}
TURN = [
    TurnEvent(step=0, turn_id="t1", user_message="hi"),
    ModelRequestEvent(step=1, body=PROMPT),
    ModelResponseEvent(
        step=1,
        body={"choices": [{"message": {"content": "ok"}}]},
        latency_ms=12.5,
        prompt_tokens=50_000,
        completion_tokens=3,
    ),
    ToolCallEvent(step=1, call_id="c1", name="send_message", arguments='{"message": "ok"}'),
    ModelRequestEvent(step=0, purpose="summarize", body=PROMPT),  # the runtime's own call: not a step
    ModelResponseEvent(step=0, body={"choices": []}),
    StepEndEvent(step=1, stop_reason="send_message"),
]


def drained(queue) -> list:
    return [queue.get_nowait() for _ in range(queue.qsize())]


def shown(events: list) -> list[tuple[str, str | None, object]]:
    mapper = SseMapper()
    return [(s.event, s.id, s.data) for s in (mapper.convert(e, seq) for seq, e in events) if s is not None]


def test_the_backlog_keeps_every_event_but_no_model_body_and_a_late_subscriber_sees_the_same_stream():
    fanout = RunFanout()
    fanout.begin("run1", attempt=1)
    early = fanout.subscribe("run1")
    observer = fanout.observer("run1")
    for event in TURN:
        observer.on_event(event)
    kept = fanout._runs["run1"].events
    assert [e for _, e in kept] == [without_body(e) for e in TURN]
    assert all(e.body == {} for _, e in kept if isinstance(e, (ModelRequestEvent, ModelResponseEvent)))
    live = drained(early.queue)
    assert [e for _, e in live] == TURN and live[1][1].body is PROMPT  # a subscriber there at the time: whole
    late = drained(fanout.subscribe("run1").queue)
    assert [seq for seq, _ in late] == [first_seq(1) + n for n in range(1, len(TURN) + 1)]
    assert shown(late) == shown(live)  # step_start, model_done with its tokens … as the early one saw them
    assert drained(fanout.subscribe("run1", after=late[3][0]).queue) == late[4:]


def test_without_body_leaves_other_events_and_bodiless_ones_as_they_are():
    assert all(without_body(e) is e for e in TURN if not isinstance(e, (ModelRequestEvent, ModelResponseEvent)))
    bare = ModelRequestEvent(step=1, body={})
    assert without_body(bare) is bare
    assert without_body(TURN[2]) == ModelResponseEvent(
        step=1, body={}, latency_ms=12.5, prompt_tokens=50_000, completion_tokens=3
    )
