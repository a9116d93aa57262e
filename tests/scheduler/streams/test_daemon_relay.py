"""A run's live events reach a stream in another daemon process (issue 12: scale-out streaming), on Postgres.

Daemon X takes no work (its dispatcher is stopped before it starts), so daemon Y runs every turn while the
streams are X's. Y's model is the ledger model (tests/support/daemon_support.py: a memory edit, then `send_message`),
gated at its second step, so a subscriber can come in the middle of the turn. What X streams is compared with
what Y's own subscriber saw: the same events in the same order, each once (the relay leaves the model bodies
out). The reply's tokens (`reply_delta`, with a model that streams) are relayed like any other event, and a
watcher elsewhere makes the running daemon ask the model to stream. Over HTTP (X's API served by uvicorn in the
test's loop, read with httpx as the bytes arrive): Y as a child process; and a second client that posts the same
message (same idempotency key) in the middle of the turn, which streams the run from its start.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import os
import socket
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import httpx
import openai
import pytest
import respx
import uvicorn
from sqlalchemy import func, select

from pagemind.runtime.events import ModelRequestEvent, ModelResponseEvent, TurnEvent
from pagemind.runtime.model.client import OpenAIModelClient
from pagemind.runtime.process.settings import Settings
from pagemind.runtime.state.records import utcnow
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.state.tables.daemon import daemons, run_events
from pagemind.runtime.testing.endpoint import BASE_URL, TEST_API_KEY
from pagemind.runtime.testing.models import FunctionModel, by_purpose
from pagemind.scheduler.api.app import create_app
from pagemind.scheduler.catalog import AgentCatalog
from pagemind.scheduler.daemon import Daemon
from pagemind.scheduler.daemon_config import DaemonConfig
from pagemind.scheduler.streams import run_stream
from pagemind.scheduler.streams.relay import END_LINE, RelayStore, first_seq, relayed_line
from tests.scheduler.api.test_api import TEMPLATE as API_TEMPLATE
from tests.scheduler.api.test_api_stream import Provider, no_sleep
from tests.support.daemon_support import ledger_model, ledger_step, wait_until, write_agents

ROOT = Path(__file__).parents[3]
pytestmark = [pytest.mark.postgres, pytest.mark.parametrize("database_url", ["postgres"], indirect=True)]
TURN = [
    "turn",
    "model_request",
    "model_response",
    "tool_call",
    "tool_result",
    "memory_edit",
    "step_end",
    "model_request",
    "model_response",
    "tool_call",
    "tool_result",
    "step_end",
]


def make_daemon(url: str, folder: Path, model, **config) -> Daemon:
    settings = Settings.from_env({"PAGEMIND_HOME": str(folder.parent / "home"), "DATABASE_URL": url})
    return Daemon(
        AgentCatalog(folder, StateStore.open(settings.database_url)),
        settings,
        model=model,
        config=DaemonConfig(**{"poll_s": 0.2, **config}),
    )


async def front_end(url: str, folder: Path) -> Daemon:
    """A started daemon that takes no work: every turn runs elsewhere."""
    daemon = make_daemon(url, folder, ledger_model(), poll_s=5)  # a slow poll: the relay must not need it
    daemon.dispatcher.stopping = True  # its dispatcher loop ends at once; it still listens and streams
    await daemon.start()
    await daemon.wakeups.listening.wait()
    return daemon


def gated_ledger() -> FunctionModel:
    """The ledger model, holding every turn's second step until `model.gate` is set (`model.entered` when one
    waits)."""
    gate, entered = asyncio.Event(), asyncio.Event()

    async def step(request):
        last_user = max(i for i, m in enumerate(request.messages) if m["role"] == "user")
        if any(m["role"] == "tool" for m in request.messages[last_user + 1 :]):
            entered.set()
            await gate.wait()
        return ledger_step(request)

    model = FunctionModel(by_purpose(step))
    model.gate, model.entered = gate, entered
    return model


def bodiless(events: list) -> list:
    """Events as relayed: model requests and responses without their bodies."""
    return [
        dataclasses.replace(e, body={}) if isinstance(e, (ModelRequestEvent, ModelResponseEvent)) else e for e in events
    ]


async def collect(stream) -> tuple[list, list[int]]:
    """Every event of a stream, and the seq of each."""
    events, seqs = [], []
    async for event in stream:
        events.append(event)
        seqs.append(stream.last_seq)
    return events, seqs


def relayed_rows(daemon: Daemon) -> int:
    with daemon.store.engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(run_events)).scalar()


async def test_a_run_on_another_daemon_streams_every_event_in_order_to_early_and_late_subscribers(
    database_url, tmp_path
):
    folder = write_agents(tmp_path / "agents")
    x = await front_end(database_url, folder)
    model = gated_ledger()
    y = make_daemon(database_url, folder, model)
    try:
        # Watched before any daemon claims it: Y learns of the watcher from the claim itself.
        first = await x.submit("alice", "msg 1")
        early = x.events(first.run_id)
        assert x.run(first.run_id).watcher == x.owner
        await y.start()
        await model.entered.wait()  # mid-turn: step 1 committed, step 2 waits for the model
        late = x.events(first.run_id)  # a second subscriber in X comes late
        local = y.events(first.run_id)  # and one in Y, the executor itself
        model.gate.set()
        (got, seqs), (got_late, _), (seen, seen_seqs) = await asyncio.gather(
            collect(early), collect(late), collect(local)
        )
        assert [e.type for e in seen] == TURN
        assert got == got_late == bodiless(seen)  # every event, in order, none twice
        assert seqs == seen_seqs == [first_seq(1) + n for n in range(1, len(TURN) + 1)]
        assert (await x.wait(first.run_id, 30)).result["reply"] == "ack 1"

        # Watched only in the middle of the run: Y hears the watch (NOTIFY) and relays from the first event.
        await y.wakeups.listening.wait()
        model.gate.clear()
        model.entered.clear()
        second = await x.submit("alice", "msg 2")
        await model.entered.wait()
        # The first run's events and its end row; nothing of the second written while nobody else watched.
        assert relayed_rows(x) == len(TURN) + 1
        mid = x.events(second.run_id)
        model.gate.set()
        got, seqs = await collect(mid)
        assert [e.type for e in got] == TURN and seqs == sorted(set(seqs))
        memory_edit = next(e for e in got if e.type == "memory_edit")
        assert (memory_edit.label, memory_edit.new) == ("human", "[1]\n[2]")

        # After the end: a subscriber gets the run's relayed events, then the end; after a seq, the rest.
        after = x.events(second.run_id)
        assert (await collect(after))[0] == got
        rest, rest_seqs = await collect(x.events(second.run_id, after=seqs[5]))
        assert rest == got[6:] and rest_seqs == seqs[6:]
    finally:
        await y.stop()
        await x.stop()


async def test_a_watch_the_running_daemon_never_hears_is_served_when_the_run_ends(database_url, tmp_path):
    folder = write_agents(tmp_path / "agents")
    x = await front_end(database_url, folder)
    model = gated_ledger()
    y = make_daemon(database_url, folder, model)
    await y.start()
    listen = next(task for task in y._tasks if task.get_name() == "pagemind-listen")
    listen.cancel()  # Y hears no notice: as when the watch's notice is still unread as the run ends
    try:
        item = await x.submit("alice", "msg 1")
        await model.entered.wait()
        stream = x.events(item.run_id)  # watched mid-run; Y learns of it from its finish's returned row
        model.gate.set()
        got, seqs = await collect(stream)
        assert (await x.wait(item.run_id, 30)).state == "done"
        assert relayed_rows(x) == len(TURN) + 1
        x.fanout.prune(utcnow() - timedelta(seconds=x.config.events_keep_s))  # kept for events_keep_s
        assert relayed_rows(x) == len(TURN) + 1
        x.fanout.prune(utcnow() + timedelta(seconds=1))  # as the heartbeat does once they are older
        assert relayed_rows(x) == 0
    finally:
        await y.stop()
        await x.stop()
    assert [e.type for e in got] == TURN and seqs == [first_seq(1) + n for n in range(1, len(TURN) + 1)]


async def test_a_relay_that_fails_costs_the_stream_its_events_never_the_turn(database_url, tmp_path, monkeypatch):
    folder = write_agents(tmp_path / "agents")
    x = await front_end(database_url, folder)
    y = make_daemon(database_url, folder, ledger_model())

    def broken(*_args) -> None:
        raise ConnectionError("the server went away")

    monkeypatch.setattr(y.relay, "write", broken)
    monkeypatch.setattr(run_stream, "LATE_GRACE_S", 0.5)  # how long X waits for an end row that never comes
    try:
        item = await x.submit("alice", "msg 1")
        stream = x.events(item.run_id)
        await y.start()
        got, _ = await collect(stream)
        done = await x.wait(item.run_id, 30)
    finally:
        await y.stop()
        await x.stop()
    assert got == [] and done.state == "done" and done.result["reply"] == "ack 1"


async def test_the_reply_tokens_of_a_run_elsewhere_reach_the_stream_and_make_the_model_stream(database_url, tmp_path):
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "companion.yaml").write_text(API_TEMPLATE)
    provider = Provider()
    with respx.mock(base_url=BASE_URL, assert_all_called=False) as router:
        router.post("/chat/completions").mock(side_effect=provider.handle)
        sdk = openai.AsyncOpenAI(api_key=TEST_API_KEY, base_url=BASE_URL, max_retries=0)
        y = make_daemon(database_url, folder, OpenAIModelClient(sdk, max_attempts=3, sleep=no_sleep))
        y.create_agent("companion-u1", template="companion")
        x = await front_end(database_url, folder)
        try:
            item = await x.submit("companion-u1", 'Ça "va"? 😀')
            stream = x.events(item.run_id)  # watched before Y claims it: Y asks the model to stream
            await y.start()
            got, seqs = await collect(stream)
            done = await x.wait(item.run_id, 30)
        finally:
            await y.stop()
            await x.stop()
    kinds = [e.type for e in got]
    assert "reply_delta" in kinds and "reply_reset" not in kinds and seqs == sorted(set(seqs))
    assert kinds.index("reply_delta") > kinds.index("model_request", kinds.index("step_end"))  # the second step's
    assert "".join(e.text for e in got if e.type == "reply_delta") == done.result["reply"] == 'echo: Ça "va"? 😀'
    assert [r.get("stream") for r in provider.requests] == [True, True]


def test_an_event_of_a_kind_this_version_cannot_read_is_skipped_not_stuck_on(database_url, tmp_path):
    store = StateStore.open(database_url)
    relay = RelayStore(store.engine)
    turn = relayed_line(TurnEvent(step=0, turn_id="t", user_message="hi"))
    relay.write("r" * 32, [(1, turn), (2, '{"type": "kind_from_a_newer_daemon", "step": 1}'), (3, END_LINE)], utcnow())
    events, last, ended = relay.read("r" * 32, 0)
    assert [(seq, e.type) for seq, e in events] == [(1, "turn")] and last == 3 and ended
    assert relay.read("r" * 32, 3) == ([], 3, False)


async def test_a_run_taken_over_mid_turn_streams_both_attempts_once(database_url, tmp_path):
    folder = write_agents(tmp_path / "agents")
    x = await front_end(database_url, folder)
    model = gated_ledger()
    y = make_daemon(database_url, folder, model)
    try:
        item = await x.submit("alice", "msg 1")
        stream = x.events(item.run_id)
        await y.start()
        await model.entered.wait()
        await y.stop(grace_s=0)  # the second step is cancelled; the item goes back to pending
        successor = make_daemon(database_url, folder, ledger_model())
        await successor.start()
        try:
            got, seqs = await collect(stream)
        finally:
            await successor.stop()
    finally:
        await x.stop()
    # The first attempt's step 1 and the start of step 2, then the second attempt's whole turn: step 1, a memory
    # edit, was held for step 2's commit (`runtime.loop`), so it was never stored and is done again.
    kinds = [e.type for e in got]
    cut = next(i for i, seq in enumerate(seqs) if seq > first_seq(2))
    assert kinds[:cut] == TURN[:8] and kinds[cut:] == TURN
    assert all(seq < first_seq(2) for seq in seqs[:cut]) and seqs == sorted(set(seqs))
    assert x.run(item.run_id).result["reply"] == "ack 1" and x.run(item.run_id).attempts == 2


async def test_nobody_watching_from_elsewhere_nothing_is_written(database_url, tmp_path):
    folder = write_agents(tmp_path / "agents")
    daemon = make_daemon(database_url, folder, ledger_model())
    item = await daemon.submit("alice", "msg 1")
    stream = daemon.events(item.run_id)  # the same process runs it: its own subscriber needs no relay
    await daemon.start()
    try:
        got, _ = await collect(stream)
    finally:
        await daemon.stop()
    assert [e.type for e in got] == TURN
    assert got[1].body != {}  # local subscribers get the whole event
    assert relayed_rows(daemon) == 0


class _Server(uvicorn.Server):
    def capture_signals(self):  # the test's process keeps its own signal handling
        return contextlib.nullcontext()


async def sse_pairs(response: httpx.Response):
    """(event, data) pairs as the server sends them, read off the socket one line at a time."""
    name = None
    async for line in response.aiter_lines():
        if line.startswith("event: "):
            name = line.removeprefix("event: ")
        elif line.startswith("data: ") and name:
            yield name, json.loads(line.removeprefix("data: "))
            name = None


async def read_sse(response: httpx.Response) -> list[tuple[str, dict]]:
    """Every (event, data) pair of a stream."""
    return [pair async for pair in sse_pairs(response)]


@contextlib.asynccontextmanager
async def served(daemon: Daemon):
    """An httpx client of the daemon's API, served by uvicorn on a free port in this event loop."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()  # connections wait in the backlog until uvicorn accepts them
    server = _Server(uvicorn.Config(create_app(daemon), log_config=None, access_log=False, lifespan="off"))
    serving = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{sock.getsockname()[1]}", timeout=60) as client:
            yield client
    finally:
        server.should_exit = True
        await serving


async def test_a_late_subscriber_over_http_gets_the_turn_from_its_start(database_url, tmp_path):
    folder = write_agents(tmp_path / "agents")
    x = await front_end(database_url, folder)
    model = gated_ledger()
    y = make_daemon(database_url, folder, model)
    await y.start()
    try:
        async with served(x) as client:

            async def stream(on_turn_start=None) -> list[tuple[str, dict]]:
                seen = []
                async with client.stream(
                    "POST", "/v1/agents/alice/messages/stream", json={"content": "msg 3", "idempotency_key": "k3"}
                ) as response:
                    async for name, data in sse_pairs(response):
                        seen.append((name, data))
                        if name == "turn_start" and on_turn_start:
                            on_turn_start()
                return seen

            first = asyncio.create_task(stream())
            await model.entered.wait()  # mid-turn on Y
            # The same key again: the same run, streamed from its start; the turn goes on once it has started.
            late = await stream(on_turn_start=model.gate.set)
            early = await first
    finally:
        await y.stop()
        await x.stop()
    assert (
        [name for name, _ in late]
        == [name for name, _ in early]
        == [
            "accepted",
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
            "reply",
            "done",
        ]
    )
    assert late[1:-1] == early[1:-1] and late[-2][1] == {"text": "ack 3"}
    assert late[0][1]["run_id"] == early[0][1]["run_id"]


async def test_a_stream_over_http_from_one_daemon_process_carries_the_turn_another_runs(database_url, tmp_path):
    folder = write_agents(tmp_path / "agents")
    x = await front_end(database_url, folder)
    child = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.support.daemon_child",
            str(tmp_path / "home"),
            database_url,
            str(folder),
            "serve",
        ],
        cwd=ROOT,
        env={**os.environ, "PAGEMIND_KILL_AT": ""},
    )
    try:
        await asyncio.to_thread(wait_until, lambda: serving_daemons(x) == 2, "the child daemon to serve", 120)
        async with served(x) as client:
            async with client.stream(
                "POST", "/v1/agents/alice/messages/stream", json={"content": "msg 5", "idempotency_key": "k5"}
            ) as response:
                assert response.headers["content-type"].startswith("text/event-stream")
                seen = await read_sse(response)
        names = [name for name, _ in seen]
        assert names == [
            "accepted",
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
            "reply",
            "done",
        ]
        data = [d for _, d in seen]
        assert data[4]["name"] == "core_memory_append" and data[6]["new"] == "[5]"
        assert data[5]["call_id"] == data[4]["call_id"] == "call_append_5" and not data[5]["is_error"]
        assert data[10]["name"] == data[11]["name"] == "send_message"
        assert data[-2] == {"text": "ack 5"} and data[-1]["state"] == "done"
        run = x.run(data[0]["run_id"])
        assert run.owner != x.owner and run.attempts == 1  # the child ran it
        # A late subscriber, after the end, gets the same events again from the start.
        replay, _ = await collect(x.events(run.run_id))
        assert [e.type for e in replay] == TURN
    finally:
        child.terminate()
        await asyncio.to_thread(child.wait, 60)
        await x.stop()
    assert child.returncode == 0


def serving_daemons(daemon: Daemon) -> int:
    with daemon.store.engine.connect() as conn:
        return conn.execute(select(func.count()).select_from(daemons)).scalar()
