"""Helpers shared by the benchmark scripts: timing statistics and writing sections of bench/RESULTS.md."""

from __future__ import annotations

import os
import platform
import re
import statistics
from datetime import datetime, timezone
from pathlib import Path

RESULTS = Path(__file__).parent / "RESULTS.md"
POSTGRES = os.environ.get("PAGEMIND_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0–100) by nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))]


def median(values: list[float]) -> float:
    """The median."""
    return statistics.median(values)


def machine_note() -> str:
    """What the numbers were measured on, and how loaded it was."""
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return (f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC, {platform.python_implementation()} "
            f"{platform.python_version()}, {os.cpu_count()} CPUs, load average {load:.2f} at start")


def checkout_pythons(base: Path | None) -> dict[str, str]:
    """The interpreter of this checkout and, with `base`, of that one first: each checkout's own `.venv`, whose
    editable install runs that checkout's code. Keys: "base", "this tree"."""
    this = {"this tree": str(Path(__file__).resolve().parent.parent / ".venv" / "bin" / "python")}
    return {"base": str(base / ".venv" / "bin" / "python"), **this} if base else this


def alternating(names: list[str], round_index: int) -> list[str]:
    """`names` in order in even rounds and reversed in odd ones, so that a drift in the machine's load falls on
    every variant alike."""
    return list(names) if round_index % 2 == 0 else list(reversed(names))


def write_section(name: str, body: str) -> None:
    """Replace (or add) the `## name` section of bench/RESULTS.md."""
    text = RESULTS.read_text() if RESULTS.exists() else "# Benchmark results\n\nEach section is rewritten by its script.\n"
    section = f"## {name}\n\n{body.strip()}\n"
    pattern = re.compile(rf"^## {re.escape(name)}\n.*?(?=^## |\Z)", re.S | re.M)
    text = pattern.sub(lambda _: section + "\n", text) if pattern.search(text) else text.rstrip() + "\n\n" + section
    RESULTS.write_text(text)


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
