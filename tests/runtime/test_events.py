"""One union of events: every consumer handles every kind (a kind added to the union without a `case` in a
consumer fails here), and what the runtime reports is what a trace holds."""

import dataclasses
import types
from datetime import UTC, datetime
from typing import Annotated, Union, get_args, get_origin

import pytest

from pagemind.runtime.cli.demo import DemoDisplay
from pagemind.runtime.events import (
    Event,
    Flush,
    FlushAhead,
    FlushAheadEvent,
    FlushEvent,
    HistoryRepair,
    HistoryRepairEvent,
    MemoryEditEvent,
    MemoryReadEvent,
    ModelRequestEvent,
    ModelResponseEvent,
    PressureSqueezedEvent,
    PressureWarning,
    PressureWarningEvent,
    ReplyDeltaEvent,
    ReplyResetEvent,
    Salience,
    SalienceEvent,
    Squeezed,
    StepEndEvent,
    ToolCallEvent,
    ToolResultEvent,
    TurnEvent,
)
from pagemind.runtime.observer import NullObserver, ObserverGroup
from pagemind.runtime.testing.models import ScriptedModel
from pagemind.runtime.testing.responses import reply_body
from pagemind.runtime.trace.comparison import compare, describe
from pagemind.runtime.trace.format import LINE_ADAPTER
from pagemind.runtime.trace.reader import read_trace
from pagemind.runtime.trace.recorder import record
from pagemind.runtime.trace.timeline import BarScale, TimelineRenderer
from pagemind.scheduler.api.sse import SseMapper

AT = datetime(2026, 3, 2, 9, 14, 5, tzinfo=UTC)
REQUEST = {
    "model": "m",
    "messages": [
        {"role": "system", "content": "<instructions>\nx\n</instructions>"},
        {"role": "user", "content": "hi"},
    ],
    "temperature": 0.7,
    "max_tokens": 64,
}

SAMPLES = [  # one turn's worth, in an order the runtime could report them
    TurnEvent(step=0, turn_id="u1", user_message="Hi, I'm Lin."),
    HistoryRepairEvent(step=1, data=HistoryRepair(problems=["a call without its result: c0"], added=1, dropped=0)),
    PressureWarningEvent(step=1, data=PressureWarning(tokens=700, usable=1000, percent=70)),
    PressureSqueezedEvent(
        step=1,
        data=Squeezed(
            tokens=920,
            usable=1000,
            flush_at=900,
            hard_at=1200,
            floor=880,
            room=20,
            needed=200,
            pinned={"tools": 700, "system": 100},
        ),
    ),
    FlushAheadEvent(step=1, data=FlushAhead(action="started", evicting=4, tokens=420)),
    FlushAheadEvent(step=1, data=FlushAhead(action="discarded", evicting=4, tokens=420, reason="the window changed")),
    FlushEvent(
        step=1,
        data=Flush(
            evicted=4,
            tokens_before=900,
            tokens_after=400,
            summary_tokens=50,
            summary_chunks=1,
            extraction="stored",
            extracted=2,
            enough=True,
            ahead=True,
            waited_ms=0.5,
        ),
    ),
    SalienceEvent(
        step=1,
        data=Salience(gate="prefetch", remember=False, lookup=False, score=0.0, reason="chit-chat", source="rules"),
    ),
    ModelRequestEvent(step=1, body=REQUEST),
    ReplyDeltaEvent(step=1, text="not", source="content"),
    ReplyResetEvent(step=1, reason="the model's text came with a tool call: it was not the reply"),
    ReplyDeltaEvent(step=1, text="no", source="send_message"),
    ModelResponseEvent(step=1, body=reply_body("noted"), latency_ms=3.5, prompt_tokens=20, completion_tokens=2),
    ToolCallEvent(step=1, call_id="c1", name="core_memory_append", arguments='{"label": "human", "content": "Lin"}'),
    ToolResultEvent(step=1, call_id="c1", name="core_memory_append", content="Appended.", is_error=False),
    MemoryEditEvent(step=1, label="human", operation="append", old="", new="Lin", at=AT),
    MemoryReadEvent(step=0, source="archival", read="stats", request={}, result=[2, ["work"]]),
    MemoryReadEvent(
        step=0,
        source="recall",
        read="search",
        request={"query": "Lin", "roles": None, "dates": [None, None], "limit": 5, "page": 1, "mode": "bm25"},
        result=[{"id": 3, "role": "user", "time": AT.isoformat(), "text": "I'm Lin", "score": 0.5}],
    ),
    StepEndEvent(step=1, stop_reason="send_message"),
]


def _kinds(union: object) -> set[type]:
    if get_origin(union) is Annotated:
        return _kinds(get_args(union)[0])
    if get_origin(union) in (Union, types.UnionType):
        return set().union(*(_kinds(member) for member in get_args(union)))
    return {union}


def test_every_kind_of_event_has_a_sample():
    assert {type(e) for e in SAMPLES} == _kinds(Event)


@pytest.mark.parametrize("event", SAMPLES, ids=lambda e: getattr(e, "kind", e.type))
def test_every_consumer_handles_every_kind(event):
    # Each consumer's `match` ends in assert_never: a kind it forgot raises AssertionError here.
    assert compare(event, event) is None and describe(event)
    TimelineRenderer(None).render(event)
    TimelineRenderer(BarScale(usable=1000, warn=0.7, flush=0.9)).render(event)
    DemoDisplay(lambda line: None, BarScale(usable=1000, warn=0.7, flush=0.9), "user", "agent", 100).on_event(event)
    ObserverGroup([NullObserver()]).on_event(event)
    SseMapper().convert(event)  # the daemon's event stream (it once lacked flush_ahead and failed mid-stream)


@pytest.mark.parametrize("event", SAMPLES, ids=lambda e: getattr(e, "kind", e.type))
def test_an_event_is_a_trace_line(event):
    line = LINE_ADAPTER.dump_json(event)
    again = LINE_ADAPTER.validate_json(line)
    assert again == event and type(again) is type(event)


async def test_the_recorder_writes_every_kind_as_it_was_reported(make_agent, sqlite_url, tmp_path):
    agent = await make_agent(sqlite_url, ScriptedModel())
    recorder = record(agent, path=tmp_path / "all.jsonl")
    for event in SAMPLES:
        agent.observer.on_event(event)
    recorder.close()
    trace = read_trace(tmp_path / "all.jsonl")
    assert trace.complete
    recorded = [e for e in SAMPLES if not isinstance(e, (ReplyDeltaEvent, ReplyResetEvent))]  # never written
    assert trace.events == [dataclasses.replace(e, turn=1) for e in recorded]  # stamped with its turn, else equal


def test_a_flush_recorded_before_flushes_said_whether_the_summary_was_cut_still_reads():
    line = (
        b'{"clock":[],"turn":1,"step":2,"type":"event","kind":"flush","data":{"evicted":3,"tokens_before":9,'
        b'"tokens_after":4,"summary_tokens":1,"summary_chunks":1,"extraction":"skipped","extracted":0,'
        b'"enough":true}}'
    )
    event = LINE_ADAPTER.validate_json(line)
    assert isinstance(event, FlushEvent) and event.data.summary_truncated is False
    assert event.data.ahead is False and event.data.waited_ms == 0.0


def test_events_are_frozen():
    with pytest.raises(dataclasses.FrozenInstanceError):
        SAMPLES[0].turn = 3  # type: ignore[misc]
