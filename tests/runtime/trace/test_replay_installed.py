"""The issue's own reproduction, as a user runs it with the installed wheel: with each shipped agent, one turn
files an archival memory, later turns search archival and recall memory, and `pagemind replay` of every trace
the session left says identical (before traces held what a turn read, the second trace already diverged at the
statistics line: `-Archival memory: 1 memories / +0 memories`)."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.installed import clean_env, pagemind_command
from tests.support.model_server import last_turn_message, model_server, tool_call

TURNS = [
    "REMEMBER: my sister Mei lives in Lyon and loves hiking.",
    "REMEMBER: I'm allergic to peanuts.",
    "SEARCH: where does my sister live",
    "RECALL: peanuts",
    "How are you today?",
]


def _answer(body: dict[str, Any]) -> dict[str, Any]:
    """The scripted model: to a user's message the tool its first word asks for, to a tool's result a reply."""
    last = last_turn_message(body)
    if last["role"] != "user":
        return tool_call("send_message", {"message": f"done: {str(last['content'])[:60]}"})
    word, _, rest = str(last["content"]).partition(": ")
    match word:
        case "REMEMBER":
            return tool_call("archival_memory_insert", {"content": f"The user said: {rest}"})
        case "SEARCH":
            return tool_call("archival_search", {"query": rest})
        case "RECALL":
            return tool_call("conversation_search", {"query": rest})
    return tool_call("send_message", {"message": "Fine, thank you."})


@pytest.fixture
def model_url() -> Iterator[str]:
    with model_server(_answer) as url:
        yield url


@pytest.mark.parametrize("agent", ["companion", "assistant"])
def test_every_trace_of_a_session_with_memory_replays_identically(venv: Path, tmp_path: Path, model_url, agent):
    home, work = tmp_path / "home", tmp_path / "work"
    work.mkdir()
    env = clean_env(PAGEMIND_HOME=str(home), OPENAI_BASE_URL=model_url, OPENAI_API_KEY="test-key")

    def pagemind(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [pagemind_command(venv), *args], cwd=work, env=env, capture_output=True, text=True, timeout=300
        )

    assert pagemind("init").returncode == 0
    for text in TURNS:
        done = pagemind("run", f"agents/{agent}.yaml", "-m", text)
        assert done.returncode == 0, done.stderr
    traces = sorted((home / "traces" / agent).glob("*.jsonl"))
    events = {t: [json.loads(line) for line in t.read_text().splitlines()] for t in traces}
    [lines] = [e for e in events.values() if any(line.get("user_message", "").startswith("SEARCH") for line in e)]
    [found] = [line["content"] for line in lines if line.get("name") == "archival_search" and "content" in line]
    assert "Lyon" in found  # the search found the memory an earlier turn filed
    assert len(traces) == len(TURNS)
    for trace in traces:
        replayed = pagemind("replay", str(trace))
        assert replayed.returncode == 0, f"{trace.name}: {replayed.stdout}{replayed.stderr}"
        assert "IDENTICAL" in replayed.stdout.upper(), replayed.stdout
