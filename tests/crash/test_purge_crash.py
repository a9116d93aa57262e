"""A purge killed anywhere (SIGKILL at each of its crash points, `PAGEMIND_KILL_AT`) is never half-visible and is
finished by the next command that opens the stores: `pagemind agents purge alice` (the installed command, from a
folder outside the repository) is killed; the database then shows alice to nobody; the next `pagemind agents`
finishes the purge; afterwards no byte of alice's canary is in any file under PAGEMIND_HOME, and bob is intact.

The home with both agents' turns is made once and copied for each point.
"""

from __future__ import annotations

import shutil
import signal
import sqlite3
from pathlib import Path

import pytest

from tests.runtime.erasure.support import AGENT_YAML, files_holding, scripted_model
from tests.runtime.erasure.test_purge_cli import ALICE, BOB, pagemind

POINTS = [
    "purge.recorded",
    "purge.traces_deleted",
    "purge.points_deleted",
    "edge.rewrite.swapping",
    "purge.store_compacted",
    "purge.vectors_erased",
    "purge.rows_erased",
    "purge.compacted",
]


@pytest.fixture(scope="module")
def prepared(venv, tmp_path_factory) -> tuple[Path, Path]:
    """(work folder, home) where alice and bob each said their canary in two turns."""
    root = tmp_path_factory.mktemp("purge-crash")
    work, home = root / "work", root / "state"
    work.mkdir()
    for name in ("alice", "bob"):
        (work / f"{name}.yaml").write_text(AGENT_YAML.format(name=name))
    with scripted_model() as url:
        for name, canary in (("alice", ALICE), ("bob", BOB)):
            for turn in (f"my secret is {canary}", f"remember {canary} please"):
                done = pagemind(venv, work, home, "run", f"{name}.yaml", "-m", turn, OPENAI_BASE_URL=url)
                assert done.returncode == 0, done.stderr
    return work, home


def stored(home: Path) -> tuple[list[str], int]:
    """(the agents' names as stored, the purges pending), read from the file directly (no purge resumed)."""
    with sqlite3.connect(home / "pagemind.db") as db:
        names = [row[0] for row in db.execute("SELECT name FROM agents ORDER BY name")]
        [[pending]] = db.execute("SELECT count(*) FROM purges").fetchall()
    return names, pending


@pytest.mark.parametrize("point", POINTS)
def test_a_purge_killed_anywhere_is_hidden_then_finished_by_the_next_command(venv, prepared, tmp_path, point):
    work, original = prepared
    home = tmp_path / "state"
    shutil.copytree(original, home)

    killed = pagemind(venv, work, home, "agents", "purge", "alice", PAGEMIND_KILL_AT=point)
    assert killed.returncode == -signal.SIGKILL, (killed.returncode, killed.stderr)
    names, pending = stored(home)
    assert "alice" not in names and "bob" in names and pending == 1  # invisible from the record on

    listing = pagemind(venv, work, home, "agents")  # any command that opens the stores finishes it
    assert listing.returncode == 0, listing.stderr
    assert "alice" not in listing.stdout and "bob" in listing.stdout
    assert stored(home) == (["bob"], 0)
    assert files_holding(home, ALICE) == []
    assert not list((home / "qdrant").glob("*.rewrite-*"))
    found = pagemind(venv, work, home, "memory", "search", "bob", f"secret {BOB}")
    assert found.returncode == 0 and BOB in found.stdout, found.stderr

    again = pagemind(venv, work, home, "agents", "purge", "alice")
    assert again.returncode == 2 and "no agent is called 'alice'" in again.stderr
