"""Shared fixtures: a scripted OpenAI endpoint at the HTTP layer (respx), databases, agents."""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

import httpx
import openai
import pytest
import respx
import sqlalchemy

from pagemind.runtime.agent import Agent
from pagemind.runtime.model_client import OpenAIModelClient
from pagemind.runtime.testing import reply_body, tool_call_body, tool_calls_body, call
from pagemind.runtime.spec import AgentSpec
from pagemind.runtime.state.store import StateStore, make_engine
from pagemind.runtime.logs import configure_logging

BASE_URL = "http://scripted.test/v1"
TEST_API_KEY = "sk-test-DO-NOT-LEAK-1234567890"
POSTGRES_URL = os.environ.get("PAGEMIND_TEST_POSTGRES_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/test")

configure_logging("WARNING")


def tool_call(name: str, arguments: dict[str, Any] | str | None = None, call_id: str | None = None) -> dict[str, Any]:
    """A scripted response with one tool call."""
    return tool_call_body(name, arguments, call_id)


def tool_calls(*calls: tuple[str, dict[str, Any] | str]) -> dict[str, Any]:
    """A scripted response with several tool calls, given as (name, arguments) pairs."""
    return tool_calls_body(*(call(name, args) for name, args in calls))


def reply(text: str) -> dict[str, Any]:
    """A scripted plain-text response."""
    return reply_body(text)


def http_error(status: int, message: str = "error", code: str | None = None, headers: dict[str, str] | None = None) -> httpx.Response:
    """A scripted HTTP error with an OpenAI-shaped body."""
    body = {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": code}}
    return httpx.Response(status, json=body, headers=headers or {})


@dataclass
class ScriptedOpenAI:
    """The responses an OpenAI-compatible endpoint will give, in order, and the requests it received."""

    script: list[Any] = field(default_factory=list)
    requests: list[dict[str, Any]] = field(default_factory=list)
    headers: list[httpx.Headers] = field(default_factory=list)
    unexpected: int = 0
    sleeps: list[float] = field(default_factory=list)

    def add(self, *items: Any) -> "ScriptedOpenAI":
        """Queue response bodies (dicts), httpx.Responses, or exceptions to raise at the transport."""
        self.script.extend(items)
        return self

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(json.loads(request.content))
        self.headers.append(request.headers)
        if not self.script:
            self.unexpected += 1
            return http_error(418, "scripted_openai: unexpected request (script exhausted)")
        item = self.script.pop(0)
        if isinstance(item, BaseException):
            raise item
        return item if isinstance(item, httpx.Response) else httpx.Response(200, json=item)

    async def fake_sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)

    def client(self, max_attempts: int = 4) -> OpenAIModelClient:
        """A real OpenAIModelClient pointed at this script; backoff sleeps are recorded, not slept."""
        sdk = openai.AsyncOpenAI(api_key=TEST_API_KEY, base_url=BASE_URL, max_retries=0)
        return OpenAIModelClient(sdk, max_attempts=max_attempts, sleep=self.fake_sleep)


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
    yield f"{POSTGRES_URL}?options=-csearch_path%3D{schema}"
    with admin.begin() as conn:
        conn.execute(sqlalchemy.text(f"DROP SCHEMA {schema} CASCADE"))
    admin.dispose()


@pytest.fixture
def sqlite_url(tmp_path) -> str:
    """A fresh SQLite database in a temp folder."""
    return f"sqlite:///{tmp_path / 'pagemind.db'}"


class FixedClock:
    """A clock tests move by hand."""

    def __init__(self, start: datetime = datetime(2026, 11, 29, 15, 0, tzinfo=timezone.utc)):
        self.current = start

    def __call__(self) -> datetime:
        return self.current


@pytest.fixture
def clock() -> FixedClock:
    return FixedClock()


SPEC_YAML = {
    "name": "tester",
    "model": {"name": "gpt-4o-mini", "context_window": 8192, "max_output_tokens": 256},
    "system": "You are a test agent.",
    "blocks": [
        {"label": "persona", "value": "I am a careful tester.", "limit": 200, "description": "Who I am."},
        {"label": "human", "value": "", "limit": 100, "description": "What I know about the user."},
        {"label": "constraints", "value": "Never suggest peanuts.", "limit": 200, "read_only": True},
    ],
    "max_steps_per_turn": 4,
}


@pytest.fixture
def spec() -> AgentSpec:
    return AgentSpec.model_validate(SPEC_YAML)


@pytest.fixture
def make_agent(clock) -> Callable[..., Any]:
    """Build an agent over a given database with a given model client."""

    async def make(database_url: str, model: Any, spec: AgentSpec | None = None, **kwargs: Any) -> Agent:
        store = StateStore(make_engine(database_url))
        return await Agent.load(spec or AgentSpec.model_validate(SPEC_YAML), model=model, store=store,
                                clock=clock, **kwargs)

    return make
