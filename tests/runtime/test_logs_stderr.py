"""Library use never writes to stdout: logs go to stderr at PAGEMIND_LOG_LEVEL (default WARNING)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]

TURN = """
import asyncio
from pagemind.runtime import Agent
from pagemind.runtime.testing.models import ScriptedModel
from pagemind.runtime.testing.responses import reply_body, tool_call_body
from pagemind.runtime.testing.specs import build_spec

async def main():
    model = ScriptedModel([tool_call_body("core_memory_append", {"label": "human", "content": "Lin."}),
                           reply_body("Hello Lin.")])
    agent = await Agent.load(build_spec("quiet"), model=model)
    reply = await agent.send("Hi, I'm Lin.")
    assert reply == "Hello Lin.", reply

asyncio.run(main())
"""


def run_turn_in_subprocess(tmp_path: Path, level: str | None) -> subprocess.CompletedProcess[str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OPENAI_", "DATABASE_URL", "QDRANT_", "PAGEMIND_LOG_LEVEL"))
    }
    env["PAGEMIND_HOME"] = str(tmp_path / "home")
    env["PAGEMIND_EMBEDDING_MODEL"] = ""
    if level is not None:
        env["PAGEMIND_LOG_LEVEL"] = level
    return subprocess.run(
        [sys.executable, "-c", TURN], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )


@pytest.mark.parametrize("level", [None, "WARNING", "info", "debug"])
def test_the_python_api_writes_nothing_to_stdout(tmp_path, level):
    done = run_turn_in_subprocess(tmp_path, level)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    if level in ("info", "debug"):
        assert '"step"' in done.stderr  # the level is honoured: info events reach stderr
    else:
        assert '"step"' not in done.stderr  # WARNING (the default) hides the per-step info lines


def test_a_bad_level_falls_back_to_warning_for_library_use(tmp_path):
    done = run_turn_in_subprocess(tmp_path, "bogus")
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
    assert "bad_log_level" in done.stderr and '"step"' not in done.stderr


def test_an_application_that_configured_structlog_keeps_its_configuration():
    code = (
        "import structlog, io, sys\n"
        "buf = io.StringIO()\n"
        "structlog.configure(logger_factory=structlog.PrintLoggerFactory(file=buf))\n"
        "import pagemind.runtime.agent\n"
        "structlog.get_logger('x').info('mine')\n"
        "assert 'mine' in buf.getvalue(), buf.getvalue()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout == ""
