"""The daemon's shortcuts switch off (`DaemonConfig`, `pagemind serve --set NAME=VALUE`), and off they take the plain
path with the same outcome: a worker whose agent's inbox is empty gives the agent back at once (`linger_s=0`); every
step commits alone (`hold_steps=false`); a message for a lingering worker is stored pending and claimed by that
worker (`hand_off=false`; on, tests/scheduler/test_daemon_lingering.py); a turn's item is finished by a statement of
its own after the turn (`finish_with_last_step=false`), not in its last step's commit."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import update

from pagemind.runtime.messages import Message
from pagemind.runtime.state.records import utcnow
from pagemind.runtime.state.tables.daemon import inbox
from pagemind.scheduler.daemon_config import DaemonConfig
from tests.runtime.test_held_step import spy_commits
from tests.scheduler.test_daemon_core import make_daemon
from tests.scheduler.test_daemon_lingering import count_claims, first_turn
from tests.support.daemon_support import ledger_model, markers, write_agents


@pytest.fixture
def folder(tmp_path) -> Path:
    return write_agents(tmp_path / "agents")


@pytest.mark.parametrize("linger_s", [3600.0, 0.0])
async def test_the_next_message_runs_once_with_or_without_lingering(database_url, folder, linger_s):
    daemon = make_daemon(database_url, folder, ledger_model(), linger_s=linger_s, poll_s=3600, hand_off=False)
    await daemon.start()
    try:
        first = await first_turn(daemon)
        worker = daemon.dispatcher.workers.get(first.agent_id)
        claims = count_claims(daemon)
        second = await daemon.submit("alice", "msg 2")
        done = await daemon.wait(second.run_id, 60)
        assert done.state == "done" and done.attempts == 1 and done.result["reply"] == "ack 2"
        if linger_s:  # the lingering worker ran it, with one claim and no lease or lock to take again
            assert daemon.dispatcher.workers[first.agent_id] is worker and claims == [first.agent_id]
        async with daemon.agent("alice") as agent:
            assert markers(agent.memory.get("human").value) == ["1", "2"]
    finally:
        await daemon.stop(grace_s=0)


def count_finishes(daemon) -> list[str]:
    """Record the run id of every item finished apart from its turn's last step."""
    finished: list[str] = []
    real = daemon.inbox.finish

    async def finish(item, *args, **kwargs):
        finished.append(item.run_id)
        return await real(item, *args, **kwargs)

    daemon.inbox.finish = finish
    return finished


@pytest.mark.parametrize("with_last_step", [True, False])
async def test_a_turns_item_is_finished_once_with_or_without_its_last_step(database_url, folder, with_last_step):
    daemon = make_daemon(database_url, folder, ledger_model(), finish_with_last_step=with_last_step)
    finished = count_finishes(daemon)
    await daemon.start()
    try:
        first = await daemon.submit("alice", "msg 1")
        second = await daemon.submit("alice", "msg 2")  # waits behind the first: the finish's `more` says so
        done = [await daemon.wait(item.run_id, 60) for item in (first, second)]
    finally:
        await daemon.stop()
    assert [(d.state, d.result["reply"], d.attempts) for d in done] == [("done", "ack 1", 1), ("done", "ack 2", 1)]
    assert finished == ([] if with_last_step else [first.run_id, second.run_id])
    async with daemon.agent("alice") as agent:
        assert markers(agent.memory.get("human").value) == ["1", "2"]


@pytest.mark.parametrize("hold_steps", [True, False])
async def test_a_turn_is_stored_the_same_with_or_without_held_steps(database_url, folder, hold_steps):
    daemon = make_daemon(database_url, folder, ledger_model(), hold_steps=hold_steps)
    await daemon.start()
    try:
        async with daemon.agent("alice") as agent:
            assert agent.hold_steps is hold_steps
            commits = spy_commits(agent.store)
        item = await daemon.submit("alice", "msg 1")
        done = await daemon.wait(item.run_id, 60)
        async with daemon.agent("alice") as agent:
            stored = agent.store.turn_messages(agent.record.id, done.result["turn_id"])
            assert markers(agent.memory.get("human").value) == ["1"]
    finally:
        await daemon.stop()
    assert done.state == "done" and done.result["reply"] == "ack 1" and done.result["steps"] == 2
    assert [m.role for m in stored] == ["user", "assistant", "tool", "assistant", "tool"]
    assert commits == ([[1, 2]] if hold_steps else [[1], [2]])


def test_settings_by_name_and_their_errors():
    chosen = DaemonConfig.from_settings(["linger_s=0", " hold_steps = no", "hand_off=false"])
    assert (chosen.linger_s, chosen.hold_steps, chosen.hand_off) == (0, False, False)
    assert chosen.concurrency == DaemonConfig().concurrency
    with pytest.raises(ValueError, match="NAME one of .*hold_steps"):
        DaemonConfig.from_settings(["hold_step=false"])
    assert DaemonConfig.from_settings(["finish_with_last_step=no"]).finish_with_last_step is False
    with pytest.raises(ValueError, match="--set linger_s"):
        DaemonConfig.from_settings(["linger_s=-1"])
    with pytest.raises(ValueError, match="NAME=VALUE"):
        DaemonConfig.from_settings(["url=http://elsewhere"])


def test_serve_refuses_an_unknown_setting_in_one_line(folder, tmp_path):
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith(("PAGEMIND_", "DATABASE_URL"))}
    env["PAGEMIND_HOME"] = str(tmp_path / "home")
    run = subprocess.run(
        [sys.executable, "-m", "pagemind.scheduler.cli", "serve", str(folder), "--set", "nope=1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode != 0
    assert "--set 'nope=1': expected NAME=VALUE" in run.stderr and "Traceback" not in run.stderr


async def test_an_item_stored_with_its_message_by_a_hand_off_is_resumed_once(database_url, folder):
    """A database left by a daemon that died after a hand-off (`hand_off`): the item running for the dead daemon,
    its turn's user message and key stored with it. The next daemon claims it again and resumes that turn, storing
    the message no second time."""
    daemon = make_daemon(database_url, folder, ledger_model())
    await daemon.catalog.read_origin("alice")
    agent_id = daemon.catalog.agent_id("alice")
    item, _ = await daemon.inbox.submit(agent_id, "alice", "message", "msg 7", "key-7", utcnow(), announce=False)
    with daemon.store.engine.begin() as conn:  # as the claimed insert left it: running, its owner gone, one attempt
        conn.execute(
            update(inbox)
            .where(inbox.c.id == item.id)
            .values(state="running", owner="a-daemon-that-died", attempts=1, lease_expires_at=utcnow())
        )
    message = Message("user", "msg 7", utcnow(), turn_id="turn-of-the-dead")
    await daemon.store.accept_message(agent_id, message, item.turn_key)
    await daemon.start()
    try:
        done = await daemon.wait(item.run_id, 60)
    finally:
        await daemon.stop(grace_s=30)
    assert (done.state, done.attempts, done.result["turn_id"]) == ("done", 2, "turn-of-the-dead")
    assert [m.content for m in daemon.store.all_messages(agent_id) if m.role == "user"] == ["msg 7"]
