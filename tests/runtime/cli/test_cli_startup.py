"""The CLI starts light: help loads no heavy library and no kernel module, `agents` loads SQL only.

Behavioural checks (which modules a fresh process has loaded), not timings: bench/cli_startup.py measures those.
(That runtime/cli has no import cycle, and nothing below it imports it, is checked with the rest of the
architecture in tests/project/test_architecture.py.)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[3]

# Each costs from tens of milliseconds (numpy, httpx) to half a second (openai) to import.
HEAVY = {
    "openai",
    "httpx",
    "sqlalchemy",
    "sqlmodel",
    "alembic",
    "psycopg",
    "fastembed",
    "onnxruntime",
    "qdrant_client",
    "qdrant_edge",
    "numpy",
    "tiktoken",
    "pydantic",
}

PROBE = """
import contextlib, io, json, sys
from pagemind.scheduler.cli import main
with contextlib.redirect_stdout(io.StringIO()) as shown:
    try:
        code = main(sys.argv[1:])
    except SystemExit as exc:
        code = exc.code
print(json.dumps({"code": code, "out": shown.getvalue(), "modules": sorted(sys.modules)}))
"""


def loaded_by(tmp_path: Path, *argv: str) -> tuple[int, str, set[str]]:
    """Run the CLI's main with `argv` in a fresh interpreter: (exit code, output, modules it had loaded)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "DATABASE_URL", "QDRANT_"))}
    env["PAGEMIND_HOME"] = str(tmp_path / "home")
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    return result["code"], result["out"], set(result["modules"])


def top_level(modules: set[str]) -> set[str]:
    return {m.split(".")[0] for m in modules}


@pytest.mark.parametrize(
    "argv",
    [
        ["--help"],
        ["run", "--help"],
        ["memory", "search", "--help"],
        ["serve", "--help"],
        ["trace", "show", "--help"],
        ["replay", "--help"],
    ],
)
def test_help_loads_no_heavy_library_and_no_kernel_module(tmp_path, argv):
    code, out, modules = loaded_by(tmp_path, *argv)
    assert code == 0 and "usage: pagemind" in out
    assert top_level(modules) & HEAVY == set()
    cli = ("pagemind.runtime.cli", "pagemind.scheduler.cli")  # the console script is the scheduler's (it adds serve)
    kernel = {m for m in modules if m.startswith("pagemind.") and not m.startswith(cli)}
    # The packages, nothing under them but the CLI and the state folder's lookup (standard library and
    # platformdirs: the help names the folder).
    home = {"pagemind.runtime.process", "pagemind.runtime.process.home"}
    assert kernel <= {"pagemind.runtime", "pagemind.scheduler", *home}


def test_agents_loads_sql_but_not_the_model_sdk_tokenizer_or_vector_stores(tmp_path):
    code, out, modules = loaded_by(tmp_path, "agents")
    assert code == 0 and out.startswith("no agents yet")
    assert {"sqlalchemy", "sqlmodel"} <= top_level(modules)
    assert (
        top_level(modules)
        & {"openai", "httpx", "tiktoken", "numpy", "fastembed", "onnxruntime", "qdrant_client", "qdrant_edge"}
        == set()
    )
    assert "pagemind.runtime.agent" not in modules
