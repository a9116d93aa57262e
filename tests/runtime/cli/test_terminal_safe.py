"""Stored text reaches the terminal inert: a block, a message, an archival memory and a trace holding escape
sequences (a retitle, a screen clear) are printed by `pagemind memory`, `memory archival`, `memory search`,
`context` and `trace show` with every control character shown as `\\xNN`, never sent to the terminal."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pagemind.runtime import Agent
from pagemind.runtime.cli.shared import terminal_safe
from pagemind.runtime.memory.vectors.stores import close_all
from pagemind.runtime.testing.models import ScriptedModel
from pagemind.runtime.testing.responses import tool_call_body
from pagemind.runtime.testing.specs import build_spec
from pagemind.runtime.trace.recorder import record

RETITLE = "\x1b]0;pwned\x07"
CLEAR = "\x1b[2J"
C1 = "\x9b31m"  # a C1 CSI: a colour on terminals that take 8-bit controls


def test_terminal_safe_keeps_text_and_shows_controls():
    assert terminal_safe(f"a\tb\nc{RETITLE}{CLEAR}{C1}\r\x00") == "a\tb\nc\\x1b]0;pwned\\x07\\x1b[2J\\x9b31m\\x0d\\x00"
    assert terminal_safe("Grüße, 你好 🙂") == "Grüße, 你好 🙂"


@pytest.fixture
def stored(tmp_path, monkeypatch) -> tuple[Path, Path]:
    """(home, trace): an agent whose block, messages, archival memory and trace hold escape sequences."""
    home = tmp_path / "home"
    monkeypatch.setenv("PAGEMIND_HOME", str(home))
    trace = tmp_path / "shared.jsonl"

    async def go() -> None:
        model = ScriptedModel(
            [
                tool_call_body("archival_memory_insert", {"content": f"pwned memory {RETITLE}{CLEAR}"}),
                tool_call_body("send_message", {"message": f"reply {CLEAR}{C1}"}),
            ]
        )
        spec = build_spec(
            "termy",
            human=f"Lin {RETITLE}{CLEAR}",
            tools=["send_message", "archival_memory_insert", "archival_search", "conversation_search"],
        )
        agent = await Agent.load(spec, model=model)
        recorder = record(agent, path=trace)
        try:
            await agent.send(f"hello {RETITLE} pwned {CLEAR}")
        finally:
            recorder.close()
            agent.store.engine.dispose()
            close_all()  # the embedded vector store has one process at a time: the commands below open it

    asyncio.run(go())
    return home, trace


@pytest.mark.parametrize(
    "command",
    [
        ["memory", "termy"],
        ["memory", "archival", "termy"],
        ["memory", "search", "termy", "pwned memory"],
        ["context", "termy"],
        ["trace", "show", "TRACE"],
    ],
)
def test_no_control_character_from_storage_reaches_the_terminal(stored, command):
    home, trace = stored
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "DATABASE_URL", "QDRANT_"))}
    env["PAGEMIND_HOME"] = str(home)
    args = [str(trace) if a == "TRACE" else a for a in command]
    done = subprocess.run(
        [sys.executable, "-m", "pagemind.runtime.cli.main", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    printed = done.stdout + done.stderr
    assert "\\x1b]0;pwned" in printed or "\\x1b[2J" in printed, printed  # the stored text is shown, as text
    assert not any(c in printed for c in "\x1b\x07\x9b\r"), repr(printed)
