"""What users install is what we test: the wheel, built from a copy of the repository and installed non-editable into
a fresh virtual environment (offline, no build isolation), holds every module of the source tree under the
`pagemind` namespace and nothing else, imports each one, finds its package data, and runs the commands from a
folder outside the repository."""

from __future__ import annotations

import signal
import socket
import subprocess
import zipfile
from pathlib import Path

import httpx
import pytest

from tests.support.daemon_support import wait_until
from tests.support.installed import clean_env

ROOT = Path(__file__).parents[2]
SOURCE_FOLDERS = ("runtime", "tools", "blocks", "scheduler")
# Alembic's environment script runs only inside alembic (it reads `alembic.context.config` at import).
NOT_IMPORTABLE_ALONE = {"pagemind.runtime.state.migrations.env"}
TEMPLATE = """
name: companion
template: true
model: {name: gpt-4o-mini, context_window: 8192, max_output_tokens: 256}
system: You are a warm companion.
blocks:
  - {label: human, value: "", limit: 100}
"""


def source_modules() -> set[str]:
    """Every module of the source tree, by the name it is installed under."""
    names = set()
    for folder in SOURCE_FOLDERS:
        for path in (ROOT / folder).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            if "__pycache__" in parts:
                continue
            parts = parts[:-1] if parts[-1] == "__init__" else parts
            names.add(".".join(("pagemind", *parts)))
    return names


def test_the_wheel_holds_the_pagemind_namespace_and_its_data(wheel):
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
    assert {name.split("/")[0] for name in names} == {"pagemind", wheel.name.split("-py")[0] + ".dist-info"}
    assert "pagemind/__init__.py" not in names  # a namespace: other distributions may not claim it either
    assert any(n.startswith("pagemind/runtime/data/models/") for n in names)  # the shipped embedding model
    assert any(n.startswith("pagemind/runtime/data/tiktoken/") for n in names)
    assert "pagemind/runtime/state/migrations/script.py.mako" in names
    ui = "pagemind/scheduler/api/ui/"  # the memory page's templates and stylesheet
    assert {f"{ui}templates/agent.html", f"{ui}templates/sections/blocks.html", f"{ui}static/ui.css"} <= names


def test_every_module_of_the_source_tree_is_installed_and_imports(venv):
    probe = f"""
import importlib, pkgutil, sys
skip = {sorted(NOT_IMPORTABLE_ALONE)!r}
found, failed = [], []
for top in ("pagemind.runtime", "pagemind.tools", "pagemind.blocks", "pagemind.scheduler"):
    package = importlib.import_module(top)
    found.append(top)
    for info in pkgutil.walk_packages(package.__path__, top + "."):
        found.append(info.name)
        if info.name in skip:
            continue
        try:
            module = importlib.import_module(info.name)
        except Exception as error:
            failed.append(f"{{info.name}}: {{error!r}}")
            continue
        if "site-packages" not in (module.__file__ or ""):
            failed.append(f"{{info.name}} came from {{module.__file__}}")
print("\\n".join(found))
print("FAILED", *failed, sep="\\n", file=sys.stderr) if failed else None
sys.exit(1 if failed else 0)
"""
    run = subprocess.run(
        [str(venv / "bin" / "python"), "-c", probe],
        cwd=venv,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert run.returncode == 0, run.stderr[-4000:]
    assert set(run.stdout.split()) == source_modules()


def test_the_installed_copy_finds_its_data_from_another_folder(venv, tmp_path):
    probe = "import pagemind.runtime.tokens as t; print(t.__file__); print(t.count_tokens('hello world', 'o200k_base'))"
    run = subprocess.run(
        [str(venv / "bin" / "python"), "-c", probe], cwd=tmp_path, env=clean_env(), capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr[-3000:]
    module_file, tokens = run.stdout.split()
    assert module_file.startswith(str(venv)) and int(tokens) == 2


@pytest.mark.parametrize("args", [["--help"], ["reflect", "--help"], ["serve", "--help"], ["trace", "--help"]])
def test_the_console_script_answers_help(venv, tmp_path, args):
    run = subprocess.run(
        [str(venv / "bin" / "pagemind"), *args],
        cwd=tmp_path,
        env=clean_env(),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    assert "usage:" in run.stdout


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_serve_starts_and_stops_from_a_folder_outside_the_repository(venv, tmp_path):
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "companion.yaml").write_text(TEMPLATE)
    port = _free_port()
    env = clean_env(
        PAGEMIND_HOME=str(tmp_path / "home"), OPENAI_API_KEY="test-key", OPENAI_BASE_URL="http://127.0.0.1:9/v1"
    )
    process = subprocess.Popen(
        [str(venv / "bin" / "pagemind"), "serve", "agents", "--port", str(port)],
        cwd=tmp_path,
        env=env,
        stderr=subprocess.PIPE,
        text=True,
    )

    def healthy() -> bool:
        if process.poll() is not None:
            pytest.fail(f"serve exited {process.returncode}: {process.stderr.read()[-3000:]}")
        try:
            return httpx.get(f"http://127.0.0.1:{port}/health", timeout=1).status_code == 200
        except httpx.HTTPError:
            return False

    try:
        wait_until(healthy, "the installed `pagemind serve` to answer /health")
        agents = httpx.get(f"http://127.0.0.1:{port}/v1/agents", timeout=10)
        assert agents.status_code == 200, agents.text
        page = httpx.get(f"http://127.0.0.1:{port}/ui", timeout=10)  # templates read from the installed package
        assert page.status_code == 200 and "<h1>Agents</h1>" in page.text, page.text[-3000:]
        css = httpx.get(f"http://127.0.0.1:{port}/ui/static/ui.css", timeout=10)
        assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
    finally:
        process.send_signal(signal.SIGTERM)
        code = process.wait(60)
    assert code == 0, process.stderr.read()[-3000:]
    assert (tmp_path / "home").is_dir()
