"""Replay never runs code it was not told to trust: a trace naming a custom tool replays with its recorded results,
importing nothing, unless `--trust-tools` is given."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from pagemind.runtime import Agent
from pagemind.runtime.testing.models import ScriptedModel
from pagemind.runtime.testing.responses import tool_call_body
from pagemind.runtime.testing.specs import build_spec
from pagemind.runtime.trace.recorder import record

ROOT = Path(__file__).parents[3]

TOOL_MODULE = '''
"""A custom tool with visible effects: importing the module writes one file, calling the tool another."""
import os
from pathlib import Path

Path(os.environ["MARKS"], "imported").write_text("imported")


def leave_note(note: str) -> str:
    """Write a note next to the marks.

    Args:
        note: what to write.
    """
    Path(os.environ["MARKS"], "ran").write_text(note)
    return f"noted: {note}"
'''


def _record(tmp_path: Path, module: str) -> Path:
    trace = tmp_path / "bug_report.jsonl"

    async def go() -> None:
        model = ScriptedModel(
            [tool_call_body("leave_note", {"note": "hello"}), tool_call_body("send_message", {"message": "Done."})]
        )
        spec = build_spec("trusty", tools=["send_message", "core_memory_append", f"{module}:leave_note"])
        agent = await Agent.load(spec, model=model)
        recorder = record(agent, path=trace)
        try:
            assert await agent.send("Leave a note.") == "Done."
        finally:
            recorder.close()
            agent.store.engine.dispose()

    asyncio.run(go())
    return trace


def _replay(tmp_path: Path, trace: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "DATABASE_URL", "QDRANT_"))}
    env.update(
        PAGEMIND_HOME=str(tmp_path / "replay-home"),
        MARKS=str(tmp_path / "marks"),
        PYTHONPATH=os.pathsep.join([str(tmp_path / "lib"), env.get("PYTHONPATH", "")]),
    )
    return subprocess.run(
        [sys.executable, "-m", "pagemind.runtime.cli.main", "replay", str(trace), *flags],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_replay_serves_recorded_results_and_imports_nothing_unless_trusted(tmp_path, monkeypatch):
    module = "pagemind_evil_tools_" + tmp_path.name.replace("-", "_")
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / f"{module}.py").write_text(textwrap.dedent(TOOL_MODULE))
    marks = tmp_path / "marks"
    marks.mkdir()
    monkeypatch.syspath_prepend(str(tmp_path / "lib"))
    monkeypatch.setenv("MARKS", str(marks))
    monkeypatch.setenv("PAGEMIND_HOME", str(tmp_path / "home"))
    trace = _record(tmp_path, module)
    assert (marks / "ran").read_text() == "hello"  # the recording really ran it
    for mark in marks.iterdir():
        mark.unlink()

    untrusted = _replay(tmp_path, trace)
    assert untrusted.returncode == 0, untrusted.stderr
    assert untrusted.stdout.startswith("identical:"), untrusted.stdout
    assert f"{module}:leave_note" in untrusted.stdout and "--trust-tools" in untrusted.stdout
    assert list(marks.iterdir()) == []  # neither imported nor run

    trusted = _replay(tmp_path, trace, "--trust-tools")
    assert trusted.returncode == 0, trusted.stderr
    assert trusted.stdout.startswith("identical:"), trusted.stdout
    assert (marks / "imported").exists() and (marks / "ran").read_text() == "hello"


def test_trace_show_imports_nothing_a_trace_names(tmp_path, monkeypatch):
    module = "pagemind_shown_tools_" + tmp_path.name.replace("-", "_")
    (tmp_path / "lib").mkdir()
    (tmp_path / "lib" / f"{module}.py").write_text(textwrap.dedent(TOOL_MODULE))
    marks = tmp_path / "marks"
    marks.mkdir()
    monkeypatch.syspath_prepend(str(tmp_path / "lib"))
    monkeypatch.setenv("MARKS", str(marks))
    monkeypatch.setenv("PAGEMIND_HOME", str(tmp_path / "home"))
    trace = _record(tmp_path, module)
    for mark in marks.iterdir():
        mark.unlink()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "DATABASE_URL", "QDRANT_"))}
    env.update(
        PAGEMIND_HOME=str(tmp_path / "viewer"),
        MARKS=str(marks),
        PYTHONPATH=os.pathsep.join([str(tmp_path / "lib"), env.get("PYTHONPATH", "")]),
    )
    shown = subprocess.run(
        [sys.executable, "-m", "pagemind.runtime.cli.main", "trace", "show", str(trace)],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert shown.returncode == 0, shown.stderr
    assert "leave_note" in shown.stdout
    assert list(marks.iterdir()) == []  # the module the trace names was never imported
