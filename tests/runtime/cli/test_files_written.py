"""pagemind writes nowhere but its state folder and its own user cache folder: a command that embeds, run with a
fresh HOME and temp folder, leaves no file elsewhere (no onnxruntime telemetry under ~/.cache/Microsoft, no
fastembed or tokenizer cache in the temp folder); and the credentials a model URL carries are never printed."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def _env(tmp_path: Path, **extra: str) -> dict[str, str]:
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(("OPENAI_", "DATABASE_URL", "QDRANT_", "PAGEMIND_", "XDG_", "ORT_", "TIKTOKEN_", "HF_"))
    }
    env.update(
        HOME=str(tmp_path / "user"), TMPDIR=str(tmp_path / "tmp"), PAGEMIND_HOME=str(tmp_path / "state"), **extra
    )
    for folder in ("user", "tmp"):
        (tmp_path / folder).mkdir(exist_ok=True)
    return env


def _files(root: Path) -> set[Path]:
    return {p for p in root.rglob("*") if p.is_file()}


def test_a_command_that_embeds_writes_only_under_pagemind_home_and_its_cache_folder(tmp_path):
    env = _env(tmp_path)
    done = subprocess.run(
        [sys.executable, "-m", "pagemind.runtime.cli.main", "demo"],
        cwd=tmp_path / "user",
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr
    cache = tmp_path / "user" / ".cache" / "pagemind"  # platformdirs' user cache folder for a fresh HOME
    outside = sorted(
        str(p.relative_to(tmp_path))
        for p in _files(tmp_path)
        if not p.is_relative_to(tmp_path / "state") and not p.is_relative_to(cache)
    )
    assert outside == []
    assert list((cache / "tiktoken").iterdir())  # the tokenizer's tables went to the cache folder


def test_credentials_in_the_model_url_are_never_printed(tmp_path):
    agent = tmp_path / "agent.yaml"
    agent.write_text("name: leaky\nmodel: {name: m}\nsystem: Hi.\n")
    env = _env(tmp_path, OPENAI_BASE_URL="http://bob:s3cretpw@127.0.0.1:9/v1", OPENAI_API_KEY="k")
    done = subprocess.run(
        [sys.executable, "-m", "pagemind.runtime.cli.main", "run", str(agent), "-m", "hi"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 1, done.stderr
    assert "\nerror: " in "\n" + done.stderr and "(endpoint http://bob:***@127.0.0.1:9/v1" in done.stderr
    assert "s3cretpw" not in done.stdout + done.stderr
