"""Helpers shared by the benchmark scripts: timing statistics, running another bench module, and writing a
benchmark's block of bench/RESULTS.md.

The scripts are modules of the `bench` package, run from the repository root as `python -m bench.NAME`; one that
starts another runs `python -m bench.OTHER` in a child with `cwd=ROOT` (`bench_argv`).
"""

from __future__ import annotations

import os
import platform
import re
import statistics
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "bench" / "RESULTS.md"
LOCOMO = ROOT.parent / "shared" / "data" / "locomo" / "locomo_dev.json"  # the shared data, beside the checkout
POSTGRES = os.environ.get("PAGEMIND_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")
HEADER = """# Benchmark results

One current table per benchmark; earlier runs and the notes that went with them are in this file's git history.
"""
_KEY = re.compile(r"[a-z0-9][a-z0-9_.-]*")


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0–100) by nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def median(values: list[float]) -> float:
    """The median."""
    return statistics.median(values)


def machine_note() -> str:
    """How loaded the machine was as a run started (the block's "Measured" line says when, where and on what)."""
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return f"load average {load:.2f} at start"


def bench_argv(python: str, name: str, *args: str) -> list[str]:
    """The command line of `python -m bench.NAME ARGS…`. Run it with `cwd=ROOT`: `bench` and `tests` are then this
    checkout's, whichever interpreter (and so whichever checkout's `pagemind`) runs it."""
    return [python, "-m", f"bench.{name}", *args]


def checkout_pythons(base: Path | None) -> dict[str, str]:
    """The interpreter of this checkout and, with `base`, of that one first: each checkout's own `.venv`, whose
    editable install runs that checkout's code. Keys: "base", "this tree"."""
    this = {"this tree": str(ROOT / ".venv" / "bin" / "python")}
    return {"base": str(base / ".venv" / "bin" / "python"), **this} if base else this


def alternating(names: list[T], round_index: int) -> list[T]:
    """`names` (or any variants) in order in even rounds and reversed in odd ones, so that a drift in the
    machine's load falls on every variant alike."""
    return list(names) if round_index % 2 == 0 else list(reversed(names))


def table_row(*cells: object) -> str:
    """A Markdown table row of `cells`."""
    return "| " + " | ".join(str(cell) for cell in cells) + " |"


def commit() -> str:
    """This checkout's short commit, with a note when tracked files differ from it ("unknown" outside git)."""
    try:
        head = subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=True
        ).stdout.strip()
        changed = subprocess.run(
            ["git", "-C", str(ROOT), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"{head} (with uncommitted changes)" if changed else head


def machine() -> str:
    """The machine and interpreter, as the "Measured" line names them."""
    return (
        f"{platform.system()} {platform.release()} {platform.machine()}, {os.cpu_count()} CPUs, "
        f"{platform.python_implementation()} {platform.python_version()}"
    )


def measured() -> str:
    """The line under a block's title: when, at which commit, on what."""
    return f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC · commit {commit()} · {machine()}."


def block(key: str, title: str, body: str) -> str:
    """A benchmark's block of RESULTS.md: its markers, its `## title`, the "Measured" line, the body."""
    if not _KEY.fullmatch(key):
        raise ValueError(f"not a block key: {key!r}")
    body = body.strip()
    body = body[:1].upper() + body[1:]  # a body may open with `machine_note()`
    return f"<!-- bench:{key} -->\n## {title}\n\n{measured()}\n\n{body}\n<!-- /bench:{key} -->\n"


def _pattern(key: str) -> re.Pattern[str]:
    return re.compile(rf"^<!-- bench:{re.escape(key)} -->\n.*?^<!-- /bench:{re.escape(key)} -->\n?", re.S | re.M)


def read_section(key: str, results: Path | None = None) -> str:
    """The block for `key` of bench/RESULTS.md (or `results`) as it stands, markers included ("" if it has none)."""
    results = results or RESULTS
    found = _pattern(key).search(results.read_text()) if results.exists() else None
    return found.group(0) if found else ""


def write_section(key: str, title: str, body: str, results: Path | None = None) -> None:
    """Replace the block of bench/RESULTS.md between `<!-- bench:KEY -->` and `<!-- /bench:KEY -->` (or add it at the
    end) with `title`, the "Measured" line (date, commit, machine) and `body`."""
    results = results or RESULTS
    text = results.read_text() if results.exists() else HEADER
    new = block(key, title, body)
    pattern = _pattern(key)
    if pattern.search(text):
        text = pattern.sub(lambda _: new, text, count=1)
    else:
        text = text.rstrip("\n") + "\n\n" + new
    results.write_text(text)


def scratch_postgres(prefix: str) -> str:
    """The URL of a new, empty database `<prefix>_<random>` on the test Postgres server (`drop_postgres` it)."""
    import uuid

    import sqlalchemy

    name = f"{prefix}_{uuid.uuid4().hex[:8]}"
    admin = sqlalchemy.create_engine(POSTGRES, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sqlalchemy.text(f"CREATE DATABASE {name}"))
    admin.dispose()
    return POSTGRES.rsplit("/", 1)[0] + "/" + name


def drop_postgres(url: str) -> None:
    """Drop a database `scratch_postgres` made (its connections too)."""
    import sqlalchemy

    admin = sqlalchemy.create_engine(POSTGRES, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(sqlalchemy.text(f"DROP DATABASE IF EXISTS {url.rsplit('/', 1)[1]} WITH (FORCE)"))
    admin.dispose()
