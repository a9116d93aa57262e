"""The daemon's core (issue 12): the durable inbox, idempotent submissions, per-agent order, templates, jobs, live
events, and a stop that gives unfinished work back. Every test runs on SQLite and on a real Postgres."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest
import yaml

from pagemind.runtime.process.settings import Settings
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.models import FunctionModel, by_purpose
from pagemind.runtime.testing.specs import spec_data
from pagemind.scheduler.catalog import AgentCatalog
from pagemind.scheduler.daemon import Daemon
from pagemind.scheduler.daemon_config import DaemonConfig
from pagemind.scheduler.errors import AgentExists, KeyReused, NotDeletable, UnknownAgent, UnknownRun, UnknownTemplate
from tests.support.daemon_support import TEMPLATE, ledger_model, ledger_step, markers, write_agents


def make_daemon(url: str, folder: Path, model, **config) -> Daemon:
    settings = Settings.from_env({"PAGEMIND_HOME": str(folder.parent / "home"), "DATABASE_URL": url})
    catalog = AgentCatalog(folder, StateStore.open(settings.database_url))
    return Daemon(catalog, settings, model=model, config=DaemonConfig(**{"poll_s": 0.2, **config}))


@pytest.fixture
def folder(tmp_path) -> Path:
    return write_agents(tmp_path / "agents")


async def test_a_message_runs_as_a_turn_and_wait_returns_its_result(database_url, folder):
    daemon = make_daemon(database_url, folder, ledger_model())
    item = await daemon.submit("alice", "msg 1")
    assert item.state == "pending" and item.agent_name == "alice"
    await daemon.start()
    try:
        done = await daemon.wait(item.run_id, timeout=30)
    finally:
        await daemon.stop()
    assert done.state == "done" and done.attempts == 1 and done.error is None
    assert done.result["reply"] == "ack 1" and done.result["stop_reason"] == "send_message"
    async with daemon.agent("alice") as agent:
        assert markers(agent.memory.get("human").value) == ["1"]
    with pytest.raises(UnknownAgent):
        await daemon.submit("nobody", "hi")
    with pytest.raises(UnknownRun):
        await daemon.wait("0" * 32, timeout=1)


async def test_the_same_key_twice_is_one_turn_with_one_answer(database_url, folder):
    model = ledger_model()
    daemon = make_daemon(database_url, folder, model)
    first = await daemon.submit("alice", "msg 7", idempotency_key="client-7")
    second = await daemon.submit("alice", "msg 7", idempotency_key="client-7")
    assert second.run_id == first.run_id
    await daemon.start()
    try:
        done = await daemon.wait(first.run_id, timeout=30)
        again = await daemon.submit("alice", "msg 7", idempotency_key="client-7")
        with pytest.raises(KeyReused):
            await daemon.submit("alice", "msg 8", idempotency_key="client-7")
    finally:
        await daemon.stop()
    assert again.run_id == first.run_id and again.state == "done" and again.result == done.result
    assert len(model.requests) == 2  # one turn: append, then send_message
    assert [i.content for i in daemon.inbox.items()] == ["msg 7"]
    async with daemon.agent("alice") as agent:
        assert markers(agent.memory.get("human").value) == ["7"]
        users = [m for m in agent.store.all_messages(agent.record.id) if m.role == "user"]
    assert [m.content for m in users] == ["msg 7"]


async def test_fifty_messages_from_concurrent_clients_run_one_at_a_time_in_arrival_order(database_url, folder):
    in_flight, most = 0, 0

    async def step(request):
        nonlocal in_flight, most
        in_flight += 1
        most = max(most, in_flight)
        await asyncio.sleep(0)  # let any other turn of the agent run here, if the daemon allowed one
        in_flight -= 1
        return ledger_step(request)

    daemon = make_daemon(database_url, folder, FunctionModel(by_purpose(step)), concurrency=8)
    await daemon.start()

    def client(numbers: range) -> None:  # a client of its own: its own engine, its own event loop
        other = make_daemon(database_url, folder, None)
        for n in numbers:
            asyncio.run(other.submit("alice", f"msg {n}"))
        other.store.engine.dispose()

    threads = [threading.Thread(target=client, args=(range(c * 10, c * 10 + 10),)) for c in range(5)]
    for thread in threads:
        thread.start()
    await asyncio.to_thread(lambda: [t.join() for t in threads])
    items = daemon.inbox.items()
    try:
        finished = [await daemon.wait(item.run_id, timeout=60) for item in items]
    finally:
        await daemon.stop()
    assert len(items) == 50 and all(f.state == "done" for f in finished)
    arrival = [item.content.split()[1] for item in items]
    assert sorted(arrival, key=int) == [str(n) for n in range(50)]
    assert most == 1
    for before, after in zip(finished, finished[1:]):
        assert before.finished_at <= after.started_at  # one at a time, oldest first
    async with daemon.agent("alice") as agent:
        assert markers(agent.memory.get("human").value) == arrival
        users = [m.content for m in agent.store.all_messages(agent.record.id) if m.role == "user"]
    assert users == [item.content for item in items]


async def test_agents_made_from_a_template_follow_it_and_keep_their_memory(database_url, folder):
    model = ledger_model()
    daemon = make_daemon(database_url, folder, model)
    info = daemon.create_agent("u1", template=TEMPLATE, blocks={"human": "Name: Lin."})
    assert (info.name, info.template, info.pending) == ("u1", TEMPLATE, 0)
    with pytest.raises(AgentExists):
        daemon.create_agent("u1", template=TEMPLATE)
    with pytest.raises(AgentExists):
        daemon.create_agent("alice", template=TEMPLATE)
    with pytest.raises(UnknownTemplate):
        daemon.create_agent("u2", template="nope")
    with pytest.raises(UnknownAgent):
        await daemon.submit(TEMPLATE, "msg 1")  # a template is not an agent
    await daemon.start()
    try:
        first = await daemon.wait((await daemon.submit("u1", "msg 1")).run_id, timeout=30)
        data = spec_data(TEMPLATE, human_limit=2000, context_window=16000, system="You are the NEW companion.")
        (folder / f"{TEMPLATE}.yaml").write_text(yaml.safe_dump({**data, "template": True}))
        second = await daemon.wait((await daemon.submit("u1", "msg 2")).run_id, timeout=30)
    finally:
        await daemon.stop()
    assert first.state == second.state == "done"
    assert "NEW companion" not in model.requests[0].messages[0]["content"]
    assert "NEW companion" in model.requests[-1].messages[0]["content"]
    async with daemon.agent("u1") as agent:
        human = agent.memory.get("human").value
        assert human.startswith("Name: Lin.") and markers(human) == ["1", "2"]
    assert [(a.name, a.template) for a in daemon.list_agents()] == [("alice", None), ("u1", TEMPLATE)]
    with pytest.raises(NotDeletable):
        daemon.delete_agent("alice")
    daemon.delete_agent("u1")
    with pytest.raises(UnknownAgent):
        await daemon.submit("u1", "msg 3")
    assert daemon.create_agent("u1", template=TEMPLATE).name == "u1"  # the name is free again, with a new memory
    async with daemon.agent("u1") as agent:
        assert markers(agent.memory.get("human").value) == []


async def test_jobs_run_in_line_and_an_unknown_job_fails(database_url, folder):
    daemon = make_daemon(database_url, folder, ledger_model())
    await daemon.start()
    try:
        for n in range(3):
            await daemon.submit("alice", f"msg {n}")
        job = await daemon.wait((await daemon.submit("alice", "compact", kind="job")).run_id, timeout=30)
        unknown = await daemon.wait((await daemon.submit("alice", "defrag", kind="job")).run_id, timeout=30)
    finally:
        await daemon.stop()
    assert job.state == "done" and job.result["job"] == "compact" and job.result["evicted"] > 0
    assert [i.state for i in daemon.inbox.items()][:3] == ["done"] * 3  # the messages before it ran first
    assert unknown.state == "failed" and "unknown job 'defrag'" in unknown.error


async def test_events_stream_a_run_live_and_end_with_it(database_url, folder):
    daemon = make_daemon(database_url, folder, ledger_model())
    item = await daemon.submit("alice", "msg 1")
    stream = daemon.events(item.run_id)  # subscribed now, before the run starts
    await daemon.start()
    try:
        kinds = [event.type async for event in stream]
    finally:
        await daemon.stop()
    assert kinds[0] == "turn" and kinds[-1] == "step_end"
    assert kinds.count("step_end") == 2 and "tool_call" in kinds and "memory_edit" in kinds


async def test_stop_gives_a_running_item_back_and_the_next_daemon_completes_it_once(database_url, folder):
    entered, release = asyncio.Event(), asyncio.Event()

    async def slow(request):
        entered.set()
        await release.wait()  # never set: the stop's grace runs out first
        return ledger_step(request)

    daemon = make_daemon(database_url, folder, FunctionModel(by_purpose(slow)))
    item = await daemon.submit("alice", "msg 1")
    await daemon.start()
    await entered.wait()
    await daemon.stop(grace_s=0)
    assert daemon.run(item.run_id).state == "pending"
    assert daemon.leases.holders() == {}
    model = ledger_model()
    successor = make_daemon(database_url, folder, model)
    await successor.start()
    try:
        done = await successor.wait(item.run_id, timeout=30)
    finally:
        await successor.stop()
    assert done.state == "done" and done.attempts == 2 and done.result["reply"] == "ack 1"
    async with successor.agent("alice") as agent:
        assert markers(agent.memory.get("human").value) == ["1"]
