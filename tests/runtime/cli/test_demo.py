"""`pagemind demo`: the scripted week runs through the real runtime and shows what it promises."""

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pagemind.runtime.cli.demo import FIRST_LINE, DemoModel, DemoScript, load_script, run_demo
from pagemind.runtime.model.client import ModelRequest

ROOT = Path(__file__).parents[3]


@pytest.fixture(scope="module")
def week() -> list[str]:
    """The demo's output lines (run once for the module)."""
    import asyncio

    lines: list[str] = []
    code = asyncio.run(run_demo(lines.append))
    assert code == 0, "\n".join(lines)
    return lines


def test_the_first_line_says_the_model_is_a_script(week):
    assert week[0] == FIRST_LINE
    assert "script written for this demo" in week[0]


def test_every_scripted_turn_is_shown_with_a_context_bar(week):
    script, _ = load_script()
    text = "\n".join(week)
    for turn in script.turns:
        assert f"── {turn.at:%a %d %b %H:%M}" in text
    bars = [line for line in week if line.lstrip().startswith("step ") and "tokens (" in line]
    assert len(bars) >= len(script.turns)
    usable = bars[0].split("/ ")[1].split(" tokens")[0]
    assert all(f"/ {usable} tokens" in line for line in bars)


def test_the_week_shows_core_memory_pressure_and_eviction(week):
    text = "\n".join(week)
    assert "memory ✎ human (append): + 'Allergic to peanuts.'" in text
    assert "memory ✎ human (replace)" in text and "memory ✎ human (rethink)" in text
    assert "! pressure warning: the window is" in text
    assert "⇣ flush:" in text and "evicted to recall memory" in text
    # The eviction happens before Mei asks about Tuesday's trail; the answer still names it (from the summary).
    flush_at = next(i for i, line in enumerate(week) if "⇣ flush:" in line)
    trail_at = next(i for i, line in enumerate(week) if "which trail you suggested on Tuesday" in line)
    assert flush_at < trail_at
    answer = next(line for line in week[trail_at:] if line.startswith("  companion › "))
    assert "Vettakollen" in answer
    assert any("call → conversation_search(" in line for line in week[trail_at : trail_at + 6])
    found = next(line for line in week[trail_at:] if "result ← Messages matching" in line)
    assert "[2026-03-03 08:05] assistant:" in found  # the evicted Tuesday message, from recall memory


def test_the_week_files_a_fact_to_archival_memory_and_finds_it_again(week):
    text = "\n".join(week)
    assert "call → archival_memory_insert(content=\"Lin looks after Brød & Co's" in text
    filed = next(i for i, line in enumerate(week) if "result ← Saved as memory" in line and "(progress)" in line)
    search = next(i for i, line in enumerate(week) if 'call → archival_search(query="croissant lamination' in line)
    assert filed < search
    assert "lamination" in week[search + 1] and "[2026-03-05]" in week[search + 1]
    assert "extraction stored" in text  # the flush mined the evicted messages into archival memory
    assert any(line.startswith("archival memory: ") and "memories" in line for line in week)


def test_the_epilogue_reports_state_and_the_trace(week):
    text = "\n".join(week)
    assert "core memory (pinned in every prompt):" in text and "Allergic to peanuts." in text
    assert "evicted (still searchable)" in text and "recursive summary of what left the window:" in text
    assert "0 tool error(s)" in text
    assert any(line.startswith("trace: ") and "events over 20 steps, recorded" in line for line in week)


def test_the_demo_model_answers_by_purpose_and_fails_loudly_when_out_of_script():
    script = DemoScript.model_validate(
        {
            "title": "t",
            "agent": "a.yaml",
            "summaries": ["S1"],
            "turns": [{"at": "2026-03-02T09:00:00Z", "user": "hi", "model": [{"say": "hello"}]}],
        }
    )
    model = DemoModel(script)
    model.start_turn(0, script.turns[0])
    summary = ModelRequest("m", [{"role": "user", "content": "x"}], [], 0.0, 10, purpose="summarize")
    assert model.function(summary)["choices"][0]["message"]["content"] == "S1"
    step = ModelRequest("m", [{"role": "system", "content": "s"}, {"role": "user", "content": "hi"}], [], 0.7, 10)
    assert model.function(step)["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "send_message"
    with pytest.raises(RuntimeError, match="no response left for turn 1"):
        model.function(step)


def test_pagemind_demo_runs_from_the_command_line_without_a_model(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "DATABASE_URL", "QDRANT_"))}
    env["PAGEMIND_HOME"] = str(tmp_path / "untouched")
    result = subprocess.run(
        [sys.executable, "-m", "pagemind.runtime.cli.main", "demo", "--home", str(tmp_path / "demo")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.splitlines()[0] == FIRST_LINE
    assert (tmp_path / "demo" / "traces" / "companion" / "demo-week.jsonl").exists()
    assert not (tmp_path / "untouched").exists()


def test_the_demo_trace_replays_identically(tmp_path):
    """The whole demo week (archival inserts and searches, warnings, flushes, summaries) is deterministic."""
    import asyncio

    from pagemind.runtime.trace.reader import read_trace
    from pagemind.runtime.trace.replay import format_report, replay

    lines: list[str] = []
    assert asyncio.run(run_demo(lines.append, home=tmp_path / "demo")) == 0
    trace = read_trace(tmp_path / "demo" / "traces" / "companion" / "demo-week.jsonl")
    report = asyncio.run(replay(trace))
    assert report.status == "identical", format_report(report)
    assert report.steps == len(trace.steps)
