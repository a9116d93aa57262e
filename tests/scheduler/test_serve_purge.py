"""Purging through a running `pagemind serve` (`pagemind agents purge NAME --server URL`), and a purge a kill cut
short finished by the daemon's next start: afterwards no byte of either agent's canary is under PAGEMIND_HOME."""

from __future__ import annotations

import signal
import sqlite3
from pathlib import Path

import httpx

from tests.runtime.erasure.support import files_holding
from tests.scheduler import test_serve
from tests.scheduler.test_serve import pagemind, start_serve, stop

stub, served_folder = test_serve.stub, test_serve.environment  # the fixtures, under this module's names

CANARY_ONE, CANARY_TWO = "SERVEONE3c9d", "SERVETWO7a2f"


def test_a_purge_through_the_daemon_and_one_finished_by_its_next_start(served_folder):
    folder, env = served_folder
    home = Path(env["PAGEMIND_HOME"])
    process, url = start_serve(folder, env)
    try:
        for user, canary in (("u1", CANARY_ONE), ("u2", CANARY_TWO)):
            made = httpx.post(f"{url}/v1/agents", json={"template": "companion", "name": user})
            assert made.status_code == 201, made.text
            sent = pagemind(env, "send", user, f"my secret is {canary}", "--server", url)
            assert sent.returncode == 0 and canary in sent.stdout, sent.stderr
        purged = pagemind(env, "agents", "purge", "u1", "--server", url)
        assert purged.returncode == 0, purged.stderr
        assert purged.stdout.startswith("purged 'u1': ") and "messages " in purged.stdout
        listed = pagemind(env, "agents", "--server", url)
        assert "u1" not in listed.stdout.split() and "u2" in listed.stdout
    finally:
        code, stderr = stop(process)
    assert code == 0, stderr
    assert files_holding(home, CANARY_ONE) == [] and files_holding(home, CANARY_TWO)

    killed = pagemind({**env, "PAGEMIND_KILL_AT": "purge.rows_erased"}, "agents", "purge", "u2")
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    process, url = start_serve(folder, env)  # finishes it before it serves
    try:
        assert [a["name"] for a in httpx.get(f"{url}/v1/agents").json()["agents"]] == []
    finally:
        code, stderr = stop(process)
    assert code == 0, stderr
    with sqlite3.connect(home / "pagemind.db") as db:
        assert db.execute("SELECT count(*) FROM purges").fetchone() == (0,)
    assert files_holding(home, CANARY_TWO) == []
