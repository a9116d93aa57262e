"""The daemon child factory the crash suites share: a process that has imported pagemind once, armed for a kill at a
named crash point, and forks one daemon child per request (tests/support/daemon_child.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]


@pytest.fixture(scope="module")
def zygote():
    """The child factory (tests/support/daemon_child.py): pagemind imported once, armed; one fork per child."""
    env = {**os.environ, "PAGEMIND_KILL_AT": "armed.by_each_child"}
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.support.daemon_child", "zygote"],
        cwd=ROOT,
        env=env,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    yield process
    process.stdin.close()
    process.wait(timeout=30)


def run_child(
    zygote, home: Path, url: str, folder: Path, point: str = "", mode: str = "drain", config: dict | None = None
) -> int:
    """Fork one daemon child from the zygote and wait for its exit status (`config`: `DaemonConfig` fields)."""
    zygote.stdin.write(json.dumps([str(home), url, str(folder), mode, point, json.dumps(config or {})]) + "\n")
    zygote.stdin.flush()
    return int(zygote.stdout.readline())
