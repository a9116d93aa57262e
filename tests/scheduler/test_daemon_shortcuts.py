"""The daemon's shortcuts switch off (`DaemonConfig`, `pagemind serve --set NAME=VALUE`), and off they take the plain
path with the same outcome: a message for a lingering worker is stored pending and claimed by the woken worker
(`hand_off`); a turn's item is finished in a transaction of its own (`finish_with_last_step`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from pagemind.scheduler.daemon import DaemonConfig
from tests.scheduler.test_daemon_core import make_daemon
from tests.scheduler.test_daemon_handoff import count_claims, first_turn
from tests.support.daemon_support import ledger_model, markers, write_agents


@pytest.fixture
def folder(tmp_path) -> Path:
    return write_agents(tmp_path / "agents")


def count_finishes(daemon) -> list[str]:
    """Record the run id of every item finished apart from its turn's last step."""
    finished: list[str] = []
    real = daemon.inbox.finish

    async def finish(item, *args, **kwargs):
        finished.append(item.run_id)
        return await real(item, *args, **kwargs)

    daemon.inbox.finish = finish
    return finished


@pytest.mark.parametrize("hand_off", [True, False])
async def test_a_message_for_a_lingering_worker_runs_once_with_or_without_the_hand_off(database_url, folder, hand_off):
    daemon = make_daemon(database_url, folder, ledger_model(), linger_s=3600, poll_s=3600, hand_off=hand_off)
    await daemon.start()
    try:
        first = await first_turn(daemon)
        worker = daemon.dispatcher.workers[first.agent_id]
        claims = count_claims(daemon)
        second = await daemon.submit("alice", "msg 2")
        assert second.state == ("running" if hand_off else "pending")
        done = await daemon.wait(second.run_id, 60)
        assert done.state == "done" and done.attempts == 1 and done.result["reply"] == "ack 2"
        assert daemon.dispatcher.workers[first.agent_id] is worker  # the lingering worker ran it either way
        assert claims == ([] if hand_off else [first.agent_id])
        async with daemon.agent("alice") as agent:
            assert markers(agent.memory.get("human").value) == ["1", "2"]
    finally:
        await daemon.stop(grace_s=0)


@pytest.mark.parametrize("with_last_step", [True, False])
async def test_a_turns_item_is_finished_once_with_or_without_its_last_step(database_url, folder, with_last_step):
    daemon = make_daemon(database_url, folder, ledger_model(), finish_with_last_step=with_last_step)
    finished = count_finishes(daemon)
    await daemon.start()
    try:
        item = await daemon.submit("alice", "msg 1")
        done = await daemon.wait(item.run_id, 60)
    finally:
        await daemon.stop()
    assert done.state == "done" and done.result["reply"] == "ack 1"
    assert finished == ([] if with_last_step else [item.run_id])


def test_settings_by_name_and_their_errors():
    chosen = DaemonConfig.from_settings(["hand_off=false", "linger_s=0", " finish_with_last_step = no"])
    assert (chosen.hand_off, chosen.linger_s, chosen.finish_with_last_step) == (False, 0, False)
    assert chosen.concurrency == DaemonConfig().concurrency
    with pytest.raises(ValueError, match="NAME one of .*hand_off"):
        DaemonConfig.from_settings(["handoff=false"])
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
