"""Shared fixtures: a scripted OpenAI endpoint at the HTTP layer (respx), databases, agents.

The test doubles themselves live in `pagemind.runtime.testing`; this file only wires them into pytest.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import respx
import sqlalchemy

from pagemind.runtime.agent import Agent
from pagemind.runtime.process.logs import configure_logging
from pagemind.runtime.spec.agent import AgentSpec
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.clock import ManualClock
from pagemind.runtime.testing.endpoint import BASE_URL, ScriptedOpenAI
from pagemind.runtime.testing.specs import build_spec

# the crash suites' daemon child factory (`zygote`); the installed wheel in a fresh venv (`venv`)
pytest_plugins = ["tests.support.zygote", "tests.support.installed"]

POSTGRES_URL = os.environ.get("PAGEMIND_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")

configure_logging("WARNING")


@pytest.fixture
def scripted_openai():
    """Mock the OpenAI API at the HTTP layer; fails the test on an unexpected or an unused response."""
    script = ScriptedOpenAI()
    with respx.mock(base_url=BASE_URL, assert_all_called=False) as router:
        router.post("/chat/completions").mock(side_effect=script.handle)
        yield script
    assert script.unexpected == 0, f"{script.unexpected} request(s) arrived after the script ran out"
    assert not script.script, f"{len(script.script)} scripted response(s) were never used"


@pytest.fixture(autouse=True)
def isolated_home(tmp_path_factory, monkeypatch) -> Path:
    """Every test gets its own PAGEMIND_HOME: no test touches ./.pagemind or another test's vector store."""
    home = tmp_path_factory.mktemp("pagemind-home")
    monkeypatch.setenv("PAGEMIND_HOME", str(home))
    for name in ("DATABASE_URL", "QDRANT_URL", "QDRANT_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL"):
        monkeypatch.delenv(name, raising=False)
    return home


def _postgres_available() -> bool:
    try:
        engine = sqlalchemy.create_engine(POSTGRES_URL)
        with engine.connect():
            return True
    except Exception:
        return False


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database_url(request, tmp_path) -> str:
    """A fresh database: SQLite in a temp folder, and a real PostgreSQL (fresh schema)."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'pagemind.db'}"
        return
    if not _postgres_available():
        if os.environ.get("PAGEMIND_REQUIRE_POSTGRES"):
            pytest.fail(f"PostgreSQL required but not reachable at {POSTGRES_URL}")
        pytest.skip(f"PostgreSQL not reachable at {POSTGRES_URL}")
    schema = f"t_{uuid.uuid4().hex[:12]}"
    admin = sqlalchemy.create_engine(POSTGRES_URL)
    with admin.begin() as conn:
        conn.execute(sqlalchemy.text(f"CREATE SCHEMA {schema}"))
    # Every connection of the test is named after its schema, so that the ones it leaves open go with it: a
    # connection the code holds open on purpose (the daemon's) keeps its engine alive through SQLAlchemy's pool, and
    # a suite that opens hundreds of databases would otherwise run into the server's max_connections.
    yield f"{POSTGRES_URL}?options=-csearch_path%3D{schema}&application_name={schema}"
    with admin.begin() as conn:
        conn.execute(
            sqlalchemy.text(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = :name AND pid <> pg_backend_pid()"
            ),
            {"name": schema},
        )
        conn.execute(sqlalchemy.text(f"DROP SCHEMA {schema} CASCADE"))
    admin.dispose()


@pytest.fixture
def sqlite_url(tmp_path) -> str:
    """A fresh SQLite database in a temp folder."""
    return f"sqlite:///{tmp_path / 'pagemind.db'}"


@pytest.fixture
def clock() -> ManualClock:
    """The agent's clock, at 2026-11-29 15:00 UTC until the test moves it."""
    return ManualClock()


@pytest.fixture
def spec() -> AgentSpec:
    """The test agent's spec (`pagemind.runtime.testing.specs.build_spec()`)."""
    return build_spec()


@pytest.fixture
def make_agent(clock) -> Callable[..., Any]:
    """Build an agent over a given database with a given model client."""

    async def make(database_url: str, model: Any, spec: AgentSpec | None = None, **kwargs: Any) -> Agent:
        store = StateStore(make_engine(database_url))
        return await Agent.load(spec or build_spec(), model=model, store=store, clock=clock, **kwargs)

    return make
