"""A user's first hour, with the installed wheel alone (issue #33): `pagemind init` writes the example agents, a
custom tool beside its YAML is found, and state stays in one folder whichever folder the commands run from.

Every command is the installed console script (`venv`), run from a folder outside the repository with the
environment `clean_env` leaves; XDG_DATA_HOME and HOME point into the test's folder, so nothing is written to
the real user data folder.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.installed import clean_env, pagemind_command
from tests.support.model_server import last_turn_message, model_server, tool_call

ROOT = Path(__file__).parents[3]
EXAMPLES = ROOT / "runtime" / "data" / "agents"
WRITTEN = ("companion.yaml", "assistant.yaml", "weatherbot.yaml", "weather_tools.py")


class User:
    """One user's machine: a data folder of their own, and the folders they run `pagemind` in."""

    def __init__(self, root: Path):
        self.root = root
        self.data = root / "xdg"
        self.state = self.data / "pagemind"  # what platformdirs.user_data_dir("pagemind") is under XDG_DATA_HOME

    def folder(self, name: str) -> Path:
        """A working folder (made if missing)."""
        path = self.root / name
        path.mkdir(parents=True, exist_ok=True)
        return path

    def run(self, venv: Path, cwd: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
        """`pagemind ARGS` from `cwd`, as this user (PAGEMIND_HOME unset unless given)."""
        environ = clean_env(XDG_DATA_HOME=str(self.data), HOME=str(self.root / "home"), COLUMNS="250", **env)
        return subprocess.run(
            [pagemind_command(venv), *args], cwd=cwd, env=environ, capture_output=True, text=True, timeout=300
        )


@pytest.fixture
def user(tmp_path: Path) -> User:
    return User(tmp_path)


def test_the_repository_agents_are_the_shipped_examples():
    # The package data is the source (what `init` writes); the repository's agents/ keeps copies for its layout.
    for path in sorted((ROOT / "agents").glob("*.yaml")):
        assert path.read_bytes() == (EXAMPLES / path.name).read_bytes(), (
            f"agents/{path.name} differs from the package's"
        )
    assert {p.name for p in (ROOT / "agents").glob("*.yaml")} == {"companion.yaml", "assistant.yaml"}


def test_init_writes_the_examples_that_load_and_never_overwrites(venv, user):
    work = user.folder("work")
    done = user.run(venv, work, "init", "myagents")
    assert done.returncode == 0, done.stderr
    for name in WRITTEN:
        assert (work / "myagents" / name).read_bytes() == (EXAMPLES / name).read_bytes()
        assert f"myagents/{name}" in done.stdout
    assert "pagemind context myagents/companion.yaml" in done.stdout  # the next command to try
    for agent in ("companion", "assistant"):
        context = user.run(venv, work, "context", f"myagents/{agent}.yaml", "--json")
        assert context.returncode == 0, context.stderr
        assert json.loads(context.stdout)["messages"][0]["role"] == "system"

    (work / "myagents" / "companion.yaml").write_text("# mine\n")
    again = user.run(venv, work, "init", "myagents")
    assert again.returncode == 2 and "already has companion.yaml" in again.stderr and "Traceback" not in again.stderr
    assert (work / "myagents" / "companion.yaml").read_text() == "# mine\n"


def test_init_defaults_to_agents_in_the_current_folder(venv, user):
    work = user.folder("fresh")
    done = user.run(venv, work, "init")
    assert done.returncode == 0, done.stderr
    assert sorted(p.name for p in (work / "agents").iterdir()) == sorted(WRITTEN)


def test_a_custom_tool_beside_its_yaml_is_found_from_the_parent_and_from_inside(venv, user):
    work = user.folder("work")
    assert user.run(venv, work, "init", "myagents").returncode == 0
    from_parent = user.run(venv, work, "context", "myagents/weatherbot.yaml")
    assert from_parent.returncode == 0, from_parent.stderr
    from_inside = user.run(venv, work / "myagents", "context", "weatherbot.yaml")
    assert from_inside.returncode == 0, from_inside.stderr
    # Found beside the YAML, not anywhere: the same file in a folder without the module fails to load.
    elsewhere = user.folder("elsewhere")
    (elsewhere / "weatherbot.yaml").write_bytes((work / "myagents" / "weatherbot.yaml").read_bytes())
    alone = user.run(venv, work, "context", str(elsewhere / "weatherbot.yaml"))
    assert alone.returncode == 2 and "cannot import module 'weather_tools'" in alone.stderr


def _forecast_first(body: dict[str, Any]) -> dict[str, Any]:
    """The script: to the user's message it calls `forecast`, and to the tool's result it replies with that result
    (so the reply shows the tool ran)."""
    last = last_turn_message(body)
    if last["role"] == "user":
        return tool_call("forecast", {"city": "Oslo", "days": 2})
    return tool_call("send_message", {"message": f"tool said: {last['content']}"})


@pytest.fixture
def model_url() -> Iterator[str]:
    with model_server(_forecast_first) as url:
        yield url


def test_run_calls_the_custom_tool_beside_the_yaml(venv, user, model_url):
    work = user.folder("work")
    assert user.run(venv, work, "init", "myagents").returncode == 0
    done = user.run(
        venv,
        work,
        "run",
        "myagents/weatherbot.yaml",
        "-m",
        "What's the weather in Oslo?",
        OPENAI_BASE_URL=model_url,
        OPENAI_API_KEY="test-key",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("tool said: Forecast for Oslo (made up by the example tool):")
    assert len(done.stdout.strip().splitlines()) == 3  # the heading and two days


def test_state_is_one_folder_whichever_folder_the_commands_run_in(venv, user):
    first, second = user.folder("projects/a"), user.folder("projects/b")
    assert user.run(venv, first, "init").returncode == 0
    made = user.run(venv, first, "context", "agents/companion.yaml")
    assert made.returncode == 0, made.stderr
    assert f"note: created {user.state} for pagemind's state" in made.stderr  # said once, when it is made
    listed = user.run(venv, second, "agents")
    assert listed.returncode == 0 and listed.stdout.startswith("companion"), listed.stderr
    assert "note:" not in listed.stderr
    assert (user.state / "pagemind.db").is_file()
    assert not (first / ".pagemind").exists() and not (second / ".pagemind").exists()


def test_agents_creates_no_database_in_the_folder_it_runs_in(venv, user):
    work = user.folder("anywhere")
    listed = user.run(venv, work, "agents")
    assert listed.returncode == 0 and listed.stdout.startswith("no agents yet"), listed.stderr
    assert list(work.iterdir()) == []


def test_an_existing_local_pagemind_is_still_used_and_said_so(venv, user):
    old = user.folder("old-project")
    assert user.run(venv, old, "init").returncode == 0
    local = old / ".pagemind"
    seeded = user.run(venv, old, "context", "agents/assistant.yaml", PAGEMIND_HOME=str(local))
    assert seeded.returncode == 0, seeded.stderr
    listed = user.run(venv, old, "agents")
    assert listed.returncode == 0 and listed.stdout.startswith("assistant"), listed.stderr
    [note] = [line for line in listed.stderr.splitlines() if line.startswith("note:")]
    assert f"using {local}" in note and str(user.state) in note and "PAGEMIND_HOME" in note
    assert not user.state.exists()  # the user data folder was not made meanwhile
    helped = user.run(venv, old, "--help")
    assert helped.returncode == 0 and f"lives in {local} " in helped.stdout


def test_help_names_the_state_folder(venv, user):
    helped = user.run(venv, user.folder("anywhere"), "--help")
    assert helped.returncode == 0, helped.stderr
    assert f"lives in {user.state} (the user data folder" in helped.stdout
    assert not user.state.exists()  # help makes nothing


def test_memory_of_a_stored_agent_with_a_custom_tool_needs_no_tool(venv, user):
    work = user.folder("work")
    assert user.run(venv, work, "init", "myagents").returncode == 0
    assert user.run(venv, work, "context", "myagents/weatherbot.yaml").returncode == 0
    elsewhere = user.folder("elsewhere")
    shown = user.run(venv, elsewhere, "memory", "weatherbot")
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout.startswith("[human] 0/1000 chars, 0 edit(s)")
    # A command that needs the tool says, in one line, why the name is not enough and what to give instead.
    context = user.run(venv, elsewhere, "context", "weatherbot")
    assert context.returncode == 2
    [line] = context.stderr.splitlines()
    assert "tools[2]" in line and "weather_tools" in line and "give its YAML file instead of the name" in line


def _demo(venv: Path, user: User) -> Path:
    home = user.root / "demo-home"
    shown = user.run(venv, user.folder("anywhere"), "demo", "--home", str(home))
    assert shown.returncode == 0, shown.stderr
    return home


def test_memory_history_of_one_block_keeps_every_blocks_count(venv, user):
    home = _demo(venv, user)

    def counts(*args: str) -> list[str]:
        shown = user.run(venv, user.folder("anywhere"), "memory", "companion", *args, PAGEMIND_HOME=str(home))
        assert shown.returncode == 0, shown.stderr
        return [line for line in shown.stdout.splitlines() if line.startswith("[")]

    plain = counts()
    assert any(line.startswith("[human]") and " 0 edit(s)" not in line for line in plain)  # the demo edits `human`
    assert counts("--history", "persona") == plain == counts("--history")


def test_a_reader_that_leaves_early_is_no_error(venv, user):
    home = _demo(venv, user)
    environ = clean_env(XDG_DATA_HOME=str(user.data), HOME=str(user.root / "home"), PAGEMIND_HOME=str(home))
    for args in (["context", "companion"], ["memory", "companion"], ["trace", "show", "demo-week"]):
        process = subprocess.Popen(
            [pagemind_command(venv), *args],
            cwd=user.folder("anywhere"),
            env=environ,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        assert process.stdout is not None
        process.stdout.close()  # `| head` that has read what it wanted: every write now fails with EPIPE
        _, stderr = process.communicate(timeout=120)
        assert process.returncode == 0, (args, stderr.decode())
        assert stderr.decode() == "", args


def test_search_says_why_hits_are_out_of_score_order(venv, user):
    home = _demo(venv, user)
    found = user.run(venv, user.folder("anywhere"), "memory", "search", "companion", "sister", PAGEMIND_HOME=str(home))
    assert found.returncode == 0, found.stderr
    lines = found.stdout.splitlines()
    start = next(n for n, line in enumerate(lines) if line.startswith("recall memory"))
    scores = [float(line.split(" score ")[1].split()[0]) for line in lines[start + 1 :] if " score " in line]
    assert len(scores) >= 3
    ordered = all(a >= b for a, b in zip(scores, scores[1:], strict=False))
    assert ordered or "in the order the agent gets them" in lines[start]
