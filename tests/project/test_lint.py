"""Lint, format and types, checked with zero findings on the source packages: `ruff check`, `ruff format --check`
and `mypy --strict` (configured in pyproject.toml), and every `noqa` and `type: ignore` names its rule and says why.

The repository's folders are not laid out as `pagemind/...`, so mypy runs from a folder of symlinks
(`pagemind/runtime -> runtime`, ...; no `pagemind/__init__.py`: a namespace package, as installed)."""

from __future__ import annotations

import io
import re
import subprocess
import sys
import tempfile
import tokenize
import tomllib
from pathlib import Path

ROOT = Path(__file__).parents[2]
BIN = Path(sys.executable).parent
SOURCE_FOLDERS = ("runtime", "tools", "blocks", "scheduler")
# Kept between runs (mypy checks each cached module against its source): a warm run takes seconds, a cold one ~1 min.
MYPY_CACHE = Path(tempfile.gettempdir()) / "pagemind-mypy-cache"

# A noqa comment: `noqa:`, one or more rule codes (E501), then a reason in words.
NOQA = re.compile(r"#\s*noqa\b(?P<codes>:\s*[A-Z]+[0-9]+(?:\s*,\s*[A-Z]+[0-9]+)*)?(?P<reason>.*)", re.IGNORECASE)
# A type-ignore comment: one or more error codes in brackets, then a second comment (`# why`) with the reason.
TYPE_IGNORE = re.compile(r"#\s*type:\s*ignore\b(?P<codes>\[[a-z0-9-]+(?:\s*,\s*[a-z0-9-]+)*\])?(?P<reason>.*)")


def _run(*command: str | Path, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(c) for c in command], cwd=cwd, capture_output=True, text=True, timeout=900)


def test_ruff_finds_nothing():
    result = _run(BIN / "ruff", "check", "--no-cache", *SOURCE_FOLDERS)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]


def test_the_source_is_formatted():
    result = _run(BIN / "ruff", "format", "--check", "--no-cache", *SOURCE_FOLDERS)
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]


def test_mypy_is_configured_strict_with_the_pydantic_plugin():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["mypy"]
    assert config["strict"] is True
    assert "pydantic.mypy" in config["plugins"]


def test_mypy_strict_finds_nothing(tmp_path):
    farm = tmp_path / "farm"
    (farm / "pagemind").mkdir(parents=True)
    for folder in SOURCE_FOLDERS:
        (farm / "pagemind" / folder).symlink_to(ROOT / folder, target_is_directory=True)
    result = _run(
        BIN / "mypy",
        "--config-file",
        ROOT / "pyproject.toml",
        "--cache-dir",
        MYPY_CACHE,
        "-p",
        "pagemind",
        cwd=farm,
    )
    assert result.returncode == 0, result.stdout[-8000:] + result.stderr[-2000:]
    assert "Success: no issues found" in result.stdout, result.stdout[-2000:]


def _comments(path: Path) -> list[tuple[int, str]]:
    """(line, text) of each comment in a Python file (not `#` inside strings)."""
    tokens = tokenize.generate_tokens(io.StringIO(path.read_text(encoding="utf-8")).readline)
    return [(t.start[0], t.string) for t in tokens if t.type == tokenize.COMMENT]


def _unexplained(comment: str) -> str | None:
    """Why a suppression comment falls short (None when it names its rule and gives a reason, or is none)."""
    if (noqa := NOQA.search(comment)) is not None:
        if not noqa["codes"]:
            return "a bare noqa (name the rule)"
        if not noqa["reason"].strip():
            return "a noqa without a reason"
    if (ignore := TYPE_IGNORE.search(comment)) is not None:
        if not ignore["codes"]:
            return "a bare type: ignore (name the error code)"
        if not re.match(r"\s*#\s*\S", ignore["reason"]):
            return "a type: ignore without a reason (`  # why` after it)"
    return None


def test_every_noqa_and_type_ignore_names_its_rule_and_gives_a_reason():
    found = [
        f"{path.relative_to(ROOT)}:{line}: {why}: {comment}"
        for folder in SOURCE_FOLDERS
        for path in sorted((ROOT / folder).rglob("*.py"))
        for line, comment in _comments(path)
        if (why := _unexplained(comment)) is not None
    ]
    assert not found, "\n".join(found)


def test_the_suppression_check_tells_good_comments_from_bad():
    assert _unexplained("# noqa: F401 (imported for its effect)") is None
    assert _unexplained("# noqa: E501, E731  (generated)") is None
    assert _unexplained("# type: ignore[attr-defined]  # the stubs lack it") is None
    assert _unexplained("# an ordinary comment") is None
    assert _unexplained("# noqa") is not None
    assert _unexplained("# noqa: E712") is not None
    assert _unexplained("# type: ignore") is not None
    assert _unexplained("# type: ignore[union-attr]") is not None
    assert _unexplained("# type: ignore[union-attr]  reason without a hash") is not None
