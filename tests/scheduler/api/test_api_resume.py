"""Resuming a run's event stream (issue 12 follow-up): every event of the turn carries `id: <seq>`, and
`GET /v1/runs/{run_id}/events` with `Last-Event-ID` continues after it — none duplicated, none lost.

Served by uvicorn in the test's loop and read with a streaming httpx client as the bytes arrive (an ASGI transport
would hold the body until the run ends). The model is the ledger model gated at its second step
(tests/scheduler/streams/test_daemon_relay.py), so a client can drop the stream in the middle of the turn and come back. On SQLite in
one process; on Postgres across two daemons (the stream dropped on one, resumed on the other, and after the end on
the first again from the relayed rows).
"""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest

from pagemind.scheduler.daemon import Daemon
from tests.scheduler.streams.test_daemon_relay import front_end, gated_ledger, make_daemon, served
from tests.support.daemon_support import write_agents

TURN = [
    "turn_start",
    "step_start",
    "model_done",
    "tool_call",
    "tool_result",
    "memory_edit",
    "step_end",
    "step_start",
    "model_done",
    "tool_call",
    "tool_result",
    "step_end",
]
ENDING = ["reply", "done"]


async def sse_blocks(response: httpx.Response):
    """(event, id or None, data) per event, read off the socket as it comes."""
    fields: dict[str, str] = {}
    async for line in response.aiter_lines():
        if line == "":
            if "event" in fields:
                yield fields["event"], fields.get("id"), json.loads(fields["data"])
            fields = {}
        elif not line.startswith(":"):
            name, _, value = line.partition(": ")
            fields[name] = value


async def read_until(
    client: httpx.AsyncClient,
    method: str,
    url: str,
    stop_at: str | None = None,
    first: asyncio.Event | None = None,
    **kwargs,
) -> list[tuple[str, str | None, dict]]:
    """The events of a stream, up to and with the first `stop_at` (then the client drops the connection); `first`
    is set when the first event arrives (the stream is subscribed)."""
    seen = []
    async with client.stream(method, url, **kwargs) as response:
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"].startswith("text/event-stream")
        async for block in sse_blocks(response):
            if first is not None:
                first.set()
            seen.append(block)
            if block[0] == stop_at:
                break
    return seen


def check_ids(events: list[tuple[str, str | None, dict]]) -> list[int]:
    """The seqs of the turn's events: present, integers, strictly increasing; the ending's events carry none."""
    seqs = [int(i) for name, i, _ in events if name not in ("accepted", *ENDING, "error")]
    assert all(i is None for name, i, _ in events if name in ENDING)
    assert seqs == sorted(set(seqs)) and len(seqs) == len([e for e in events if e[0] in TURN])
    return seqs


async def drop_and_resume(first: httpx.AsyncClient, second: httpx.AsyncClient, model, content: str):
    """A stream dropped after the memory edit on `first`, resumed on `second` with Last-Event-ID; and a
    stream from the start, without Last-Event-ID, opened mid-turn on `second`."""
    head = await read_until(
        first, "POST", "/v1/agents/alice/messages/stream", stop_at="memory_edit", json={"content": content}
    )
    run_id = head[0][2]["run_id"]
    assert head[0][1] == run_id  # `accepted` carries the run id
    await model.entered.wait()  # the turn waits in its second step: the client is gone mid-turn
    last = head[-1][1]

    subscribed = asyncio.Event(), asyncio.Event()  # both streams hold events already written before the gate opens

    async def resume():
        return await read_until(
            second, "GET", f"/v1/runs/{run_id}/events", headers={"Last-Event-ID": last}, first=subscribed[0]
        )

    async def from_start():
        return await read_until(second, "GET", f"/v1/runs/{run_id}/events", first=subscribed[1])

    resumed, whole = asyncio.create_task(resume()), asyncio.create_task(from_start())
    await asyncio.wait_for(asyncio.gather(*(e.wait() for e in subscribed)), 60)
    model.gate.set()
    return run_id, head, await resumed, await whole


def check_resumed(head, resumed, whole) -> None:
    assert [e[0] for e in head] == ["accepted", *TURN[:6]]
    assert [e[0] for e in resumed] == TURN[6:] + ENDING
    assert [e[0] for e in whole] == TURN + ENDING  # no `accepted`: the GET stream starts with the turn
    joined = head[1:] + resumed
    assert joined[:-2] == whole[:-2]  # the same events, the same ids: none lost, none twice
    assert check_ids(head + resumed) == check_ids(whole)
    assert resumed[-2][2] == whole[-2][2] and resumed[-1][2]["state"] == "done"


async def test_a_dropped_stream_resumes_after_its_last_event_id_in_one_process(sqlite_url, tmp_path):
    folder = write_agents(tmp_path / "agents")
    model = gated_ledger()
    daemon = make_daemon(sqlite_url, folder, model, poll_s=0.05)
    await daemon.start()
    try:
        async with served(daemon) as client:
            run_id, head, resumed, whole = await drop_and_resume(client, client, model, "msg 1")
            check_resumed(head, resumed, whole)
            assert resumed[-2][2] == {"text": "ack 1"}
            url = f"/v1/runs/{run_id}/events"
            # A finished run on SQLite: its events are not kept; the ending is, with or without Last-Event-ID.
            for headers in ({}, {"Last-Event-ID": head[-1][1]}, {"Last-Event-ID": run_id}):
                after = await read_until(client, "GET", url, headers=headers)
                assert [e[0] for e in after] == ENDING and after[-1][2] == resumed[-1][2]
            await check_errors(client, run_id)
    finally:
        await daemon.stop(5)


async def check_errors(client: httpx.AsyncClient, run_id: str) -> None:
    response = await client.get("/v1/runs/no-such-run/events")
    assert response.status_code == 404 and response.headers["content-type"].startswith("application/json")
    assert response.json()["error"]["code"] == "unknown_run"
    response = await client.get(f"/v1/runs/{run_id}/events", headers={"Last-Event-ID": "soon"})
    assert response.status_code == 400 and response.json()["error"]["code"] == "bad_last_event_id"
    spec = (await client.get("/openapi.json")).json()
    route = spec["paths"]["/v1/runs/{run_id}/events"]["get"]
    assert "text/event-stream" in json.dumps(route) and "404" in route["responses"]


async def test_the_post_stream_carries_ids_and_keeps_its_events(sqlite_url, tmp_path):
    folder = write_agents(tmp_path / "agents")
    model = gated_ledger()
    model.gate.set()
    daemon = make_daemon(sqlite_url, folder, model, poll_s=0.05)
    await daemon.start()
    try:
        async with served(daemon) as client:
            events = await read_until(
                client, "POST", "/v1/agents/alice/messages/stream", json={"content": "msg 2", "idempotency_key": "k2"}
            )
    finally:
        await daemon.stop(5)
    assert [e[0] for e in events] == ["accepted", *TURN, *ENDING]
    check_ids(events)
    # The same key again, the run over: `accepted` and the ending (the first run; nothing runs again).
    again = await read_again(sqlite_url, folder, model)
    assert [e[0] for e in again] == ["accepted", *ENDING]
    assert again[0][2]["run_id"] == events[0][2]["run_id"] and again[-2][2] == {"text": "ack 2"}


async def read_again(url: str, folder, model):
    daemon = make_daemon(url, folder, model, poll_s=0.05)
    await daemon.start()
    try:
        async with served(daemon) as client:
            return await read_until(
                client, "POST", "/v1/agents/alice/messages/stream", json={"content": "msg 2", "idempotency_key": "k2"}
            )
    finally:
        await daemon.stop(5)


async def test_a_stream_past_its_timeout_ends_with_not_finished(sqlite_url, tmp_path):
    folder = write_agents(tmp_path / "agents")
    model = gated_ledger()
    daemon = make_daemon(sqlite_url, folder, model, poll_s=0.05)
    await daemon.start()
    try:
        async with served(daemon) as client:
            run = (await client.post("/v1/agents/alice/messages", json={"content": "msg 4", "mode": "async"})).json()
            await model.entered.wait()
            events = await read_until(client, "GET", f"/v1/runs/{run['run_id']}/events", params={"timeout_s": 0.5})
            model.gate.set()
    finally:
        await daemon.stop(5)
    assert [e[0] for e in events] == [*TURN[:8], "error", "done"]
    assert events[-2][2]["code"] == "not_finished" and events[-1][2]["state"] == "running"


@pytest.mark.postgres
@pytest.mark.parametrize("database_url", ["postgres"], indirect=True)
async def test_a_stream_dropped_on_one_daemon_resumes_on_another(database_url, tmp_path):
    """X takes no work and Y runs the turn: the client streams from X, drops, resumes on Y (where the run
    runs); once the run is over, X (which watched it, so Y relayed its events) still serves them after an id."""
    folder = write_agents(tmp_path / "agents")
    x: Daemon = await front_end(database_url, folder)
    model = gated_ledger()
    y = make_daemon(database_url, folder, model)
    await y.start()
    try:
        async with served(x) as on_x, served(y) as on_y:
            run_id, head, resumed, whole = await drop_and_resume(on_x, on_y, model, "msg 3")
            check_resumed(head, resumed, whole)
            assert y.run(run_id).owner == y.owner
            # Over, on X: the relayed rows after the id, then the ending.
            later = await read_until(on_x, "GET", f"/v1/runs/{run_id}/events", headers={"Last-Event-ID": head[-1][1]})
            assert later == resumed
            everything = await read_until(on_x, "GET", f"/v1/runs/{run_id}/events")
            assert everything == whole
            await check_errors(on_x, run_id)
            # A run nobody watched from elsewhere, over: nothing was relayed; X has only its ending.
            done = (await on_y.post("/v1/agents/alice/messages", json={"content": "msg 4"})).json()
            assert done["state"] == "done"
            ending = await read_until(on_x, "GET", f"/v1/runs/{done['run_id']}/events")
            assert [e[0] for e in ending] == ENDING and ending[0][2] == {"text": "ack 4"}
    finally:
        await y.stop()
        await x.stop()
