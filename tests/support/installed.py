"""The installed pagemind, as users get it: the wheel built from a copy of the repository (offline, no build
isolation) and installed non-editable into a fresh virtual environment, once per test session. Tests that run the
commands as a user would (`pagemind …` from a folder outside the repository) take `venv` and `clean_env`."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]


@pytest.fixture(scope="session")
def wheel(tmp_path_factory) -> Path:
    """The wheel `pip wheel` builds from a copy of the repository (no .git, no venv, no build output)."""
    work = tmp_path_factory.mktemp("wheel")
    source = work / "source"
    ignore = shutil.ignore_patterns(".venv", ".git", "build", "*.egg-info", ".pagemind", "__pycache__", ".pytest_cache")
    shutil.copytree(ROOT, source, ignore=ignore)
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index", "-q"]
        + ["-w", str(work / "dist"), str(source)],
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    [found] = (work / "dist").glob("pagemind-*.whl")
    return found


@pytest.fixture(scope="session")
def venv(wheel, tmp_path_factory) -> Path:
    """A fresh virtual environment with the wheel installed non-editable. Its dependencies come from the test
    environment's site-packages through a .pth line (whose own .pth files, the editable install's among them, are
    not processed), placed after the venv's own site-packages so the installed pagemind is the one found."""
    root = tmp_path_factory.mktemp("venv") / "env"
    subprocess.run([sys.executable, "-m", "venv", str(root)], check=True, capture_output=True)
    python = root / "bin" / "python"
    installed = subprocess.run(
        [str(python), "-m", "pip", "install", "--no-deps", "--no-index", "-q", str(wheel)],
        capture_output=True,
        text=True,
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    site = Path(
        subprocess.check_output(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"], text=True
        ).strip()
    )
    (site / "zz_test_dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    return root


def clean_env(**extra: str) -> dict[str, str]:
    """The environment without anything pointing back at the repository or at a configured service."""
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("PYTHON", "PAGEMIND_", "DATABASE_URL", "QDRANT_", "OPENAI_", "VIRTUAL_ENV"))
    }
    env.update(extra)
    return env


def pagemind_command(venv: Path) -> str:
    """The installed console script."""
    return str(venv / "bin" / "pagemind")
