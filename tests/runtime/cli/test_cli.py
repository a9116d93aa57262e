"""The CLI as a user runs it: a subprocess with its own PAGEMIND_HOME and no model endpoint."""

import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parents[3]


def pagemind(tmp_path: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "DATABASE_URL", "QDRANT_"))}
    environ.update({"PAGEMIND_HOME": str(tmp_path / "home"), **(env or {})})
    return subprocess.run(
        [sys.executable, "-m", "pagemind.runtime.cli.main", *args],
        cwd=ROOT,
        env=environ,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_commands_that_need_a_model_say_how_to_configure_one(tmp_path):
    result = pagemind(tmp_path, "run", "agents/companion.yaml", "-m", "hi")
    assert result.returncode == 2  # configuration (issue 10)
    assert "OPENAI_API_KEY" in result.stderr and "OPENAI_BASE_URL" in result.stderr
    assert "Traceback" not in result.stderr


def test_memory_context_and_agents_work_without_a_model(tmp_path):
    memory = pagemind(tmp_path, "memory", "agents/companion.yaml", "--history")
    assert memory.returncode == 0, memory.stderr
    assert (
        "[human] 0/2000 chars" in memory.stdout
        and "[constraints]" in memory.stdout
        and "history: no edits" in memory.stdout
    )
    context = pagemind(tmp_path, "context", "companion", "--json")
    assert context.returncode == 0, context.stderr
    data = json.loads(context.stdout)
    assert data["tokens"] == sum(data["sections"].values()) and data["messages"][0]["role"] == "system"
    assert data["usable"] == 16000 - 800 and data["warn_at"] == int(0.7 * 15200) and data["level"] == "ok"
    bar = pagemind(tmp_path, "context", "companion")
    assert "warn 70% / flush 90%" in bar.stdout and "/15200 tokens" in bar.stdout
    agents = pagemind(tmp_path, "agents")
    assert agents.returncode == 0 and agents.stdout.startswith("companion")


def test_a_bad_agent_file_names_file_line_and_field(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: x\nmodel:\n  name: m\nsystem: s\nmax_steps_per_turn: 0\n")
    result = pagemind(tmp_path, "context", str(bad))
    assert result.returncode == 2
    assert f"{bad}:5 max_steps_per_turn: must be greater than 0" in result.stderr


def test_unknown_agent_name_is_a_clear_error(tmp_path):
    result = pagemind(tmp_path, "memory", "ghost")
    assert result.returncode == 2 and "no agent file or stored agent called 'ghost'" in result.stderr


def test_an_existing_trace_path_is_refused_without_a_traceback(tmp_path):
    existing = tmp_path / "x.jsonl"
    existing.write_text("")
    result = pagemind(
        tmp_path,
        "run",
        "agents/companion.yaml",
        "-m",
        "hi",
        "--trace",
        str(existing),
        env={"OPENAI_BASE_URL": "http://127.0.0.1:9/v1"},
    )
    assert result.returncode == 2 and "already exists" in result.stderr and "Traceback" not in result.stderr


def test_a_stored_spec_that_no_longer_validates_is_a_clear_error(tmp_path):
    import sqlite3

    assert pagemind(tmp_path, "memory", "agents/companion.yaml").returncode == 0
    db = sqlite3.connect(tmp_path / "home" / "pagemind.db")
    spec = json.loads(db.execute("SELECT spec_json FROM agents WHERE name='companion'").fetchone()[0])
    spec["tools"].append("gone.module:fn")
    db.execute("UPDATE agents SET spec_json=? WHERE name='companion'", (json.dumps(spec),))
    db.commit()
    result = pagemind(tmp_path, "context", "companion")
    assert result.returncode == 2 and "Traceback" not in result.stderr
    [line] = result.stderr.splitlines()  # one line, not pydantic's dump
    assert "stored agent 'companion' cannot be loaded by its name here (tools[" in line and "gone" in line


def test_agents_rename_keeps_the_agent_and_its_memory(tmp_path):
    created = pagemind(tmp_path, "memory", "agents/companion.yaml")  # stores the companion
    assert created.returncode == 0, created.stderr
    renamed = pagemind(tmp_path, "agents", "rename", "companion", "lin-companion")
    assert renamed.returncode == 0, renamed.stderr
    assert "now set `name: lin-companion`" in renamed.stdout
    listing = pagemind(tmp_path, "agents")
    assert listing.stdout.startswith("lin-companion") and "\ncompanion" not in listing.stdout
    memory = pagemind(tmp_path, "memory", "lin-companion")  # by its stored spec, which names it anew
    assert memory.returncode == 0 and "[persona]" in memory.stdout
    assert pagemind(tmp_path, "agents").stdout.count("\n") == 1  # no second agent was created

    for args, said in (
        (("agents", "rename", "nobody", "x"), "no agent is called 'nobody'"),
        (("agents", "rename", "lin-companion"), "usage: pagemind agents rename OLD NEW"),
    ):
        failed = pagemind(tmp_path, *args)
        assert failed.returncode == 2 and said in failed.stderr and "Traceback" not in failed.stderr
    pagemind(tmp_path, "memory", "agents/companion.yaml")  # a new, empty 'companion' from the YAML
    taken = pagemind(tmp_path, "agents", "rename", "lin-companion", "companion")
    assert taken.returncode == 2 and "already exists" in taken.stderr
