"""Dialect differences live in one place per backend (issue 32, item 3): `runtime/state/dialects/postgres.py` and
`runtime/state/dialects/sqlite.py`. Everywhere else the code asks `dialect(engine)` what its backend does; no module
tests a backend's name, spells a backend's URL prefix, or imports SQLAlchemy's backend-specific constructs."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from pagemind.runtime.state.dialects import Dialect, dialect_for_url
from pagemind.runtime.state.dialects.postgres import POSTGRES
from pagemind.runtime.state.dialects.sqlite import SQLITE

ROOT = Path(__file__).parents[2]
SOURCE_FOLDERS = ("runtime", "tools", "blocks", "scheduler")
DIALECTS = ROOT / "runtime" / "state" / "dialects"
EXEMPT = {
    # Each revision as it ran, never edited after its release: a stored database was migrated by these very lines.
    ROOT / "runtime" / "state" / "migrations" / "versions": "migration history",
    # The environment's URL gets its driver spelt out before any database is opened (`process` is below `state`).
    ROOT / "runtime" / "process" / "settings.py": "the URL's driver",
}
BRANCHES = re.compile(
    r"dialect\.name\s*(==|!=|\bin\b|\bnot in\b)"  # a backend's name compared
    r"|(==|!=)\s*['\"](postgresql|sqlite)['\"]"
    r"|startswith\(\s*['\"](postgres|sqlite)"  # a URL's backend told by its prefix
    r"|sqlalchemy\.dialects|from sqlalchemy\.dialects import"  # a backend's own INSERT … ON CONFLICT, types
)


def _exempt(path: Path) -> bool:
    return path.is_relative_to(DIALECTS) or any(path == p or path.is_relative_to(p) for p in EXEMPT)


def test_no_module_outside_the_dialects_branches_on_the_backend():
    found = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for folder in SOURCE_FOLDERS
        for path in sorted((ROOT / folder).rglob("*.py"))
        if not _exempt(path)
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1)
        if BRANCHES.search(line)
    ]
    assert found == [], "ask runtime.state.dialects instead:\n" + "\n".join(found)


def test_the_check_would_find_a_branch():
    assert BRANCHES.search('if engine.dialect.name == "postgresql":')
    assert BRANCHES.search("postgres = conn.dialect.name != 'sqlite'")
    assert BRANCHES.search('if database_url.startswith("sqlite:///"):')
    assert BRANCHES.search("from sqlalchemy.dialects import postgresql")
    assert not BRANCHES.search("log.info('daemon_started', database=engine.dialect.name)")


def _surface(cls: type) -> set[str]:
    return {name for name in dir(cls) if not name.startswith("_")}


def test_both_backends_have_the_same_attributes_and_functions():
    expected = {name for name in Dialect.__annotations__} | {
        name for name, value in vars(Dialect).items() if callable(value) and not name.startswith("_")
    }
    assert _surface(type(POSTGRES)) == _surface(type(SQLITE)) == expected


@pytest.mark.parametrize(
    ("url", "backend"),
    [
        ("sqlite:///tmp/pagemind.db", SQLITE),
        ("sqlite://", SQLITE),
        ("postgresql+psycopg://user@host:5432/db", POSTGRES),
        ("postgresql://user@host/db", POSTGRES),
    ],
)
def test_a_url_names_its_backend(url, backend):
    assert dialect_for_url(url) is backend
