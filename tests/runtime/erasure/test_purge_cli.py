"""`pagemind agents purge NAME` as a user runs it: the installed command, from a folder outside the repository,
after real turns against a scripted model; then every byte of every file under PAGEMIND_HOME is searched."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.runtime.erasure.support import AGENT_YAML, files_holding, scripted_model
from tests.support.installed import clean_env, pagemind_command

ALICE, BOB = "ALICECANARY7f3e", "BOBCANARY91c2"


def pagemind(venv: Path, cwd: Path, home: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    environ = clean_env(PAGEMIND_HOME=str(home), HOME=str(cwd), OPENAI_API_KEY="test-key", **env)
    return subprocess.run(
        [pagemind_command(venv), *args], cwd=cwd, env=environ, capture_output=True, text=True, timeout=300
    )


@pytest.fixture
def two_agents(venv, tmp_path) -> tuple[Path, Path]:
    """A home where alice and bob each said their canary twice (two turns: a block, archival memory, messages,
    recall, the embedding cache, traces), and searched for it."""
    work, home = tmp_path / "work", tmp_path / "state"
    work.mkdir()
    for name in ("alice", "bob"):
        (work / f"{name}.yaml").write_text(AGENT_YAML.format(name=name))
    with scripted_model() as url:
        for name, canary in (("alice", ALICE), ("bob", BOB)):
            for turn in (f"my secret is {canary}", f"remember {canary} please"):
                done = pagemind(venv, work, home, "run", f"{name}.yaml", "-m", turn, OPENAI_BASE_URL=url)
                assert done.returncode == 0, done.stderr
    found = pagemind(venv, work, home, "memory", "search", "alice", canary_words(ALICE))
    assert found.returncode == 0 and ALICE in found.stdout, found.stderr
    assert files_holding(home, ALICE) and files_holding(home, BOB)
    return work, home


def canary_words(canary: str) -> str:
    return f"secret {canary}"


def test_purge_leaves_no_byte_of_the_agent_and_all_of_the_others(venv, two_agents):
    work, home = two_agents
    purged = pagemind(venv, work, home, "agents", "purge", "alice")
    assert purged.returncode == 0, purged.stderr
    line = purged.stdout.strip()
    assert line.startswith("purged 'alice': ") and "vector points" in line and "trace files" in line
    assert " 0 vector points" not in line and " 0 trace files" not in line and "messages " in line

    assert files_holding(home, ALICE) == []
    assert files_holding(home, BOB)  # bob's are still there
    listing = pagemind(venv, work, home, "agents")
    assert "alice" not in listing.stdout and "bob" in listing.stdout
    found = pagemind(venv, work, home, "memory", "search", "bob", canary_words(BOB))
    assert found.returncode == 0 and found.stdout.count(BOB) >= 2, found.stdout
    recall = pagemind(venv, work, home, "memory", "search", "bob", BOB, "--in", "recall")
    assert BOB in recall.stdout

    again = pagemind(venv, work, home, "agents", "purge", "alice")
    assert again.returncode == 2 and "no agent is called 'alice'" in again.stderr
    assert "Traceback" not in again.stderr
