"""Property-based fuzzing of the daemon's OpenAPI document with schemathesis (issue 34, must-hold 4): for every
operation, a bounded, derandomized set of generated requests (`MAX_EXAMPLES` each) is sent with an admin token to
the app in process (ASGI, offline), and every answer must be documented: no 5xx, a status code the operation lists,
the content type and the body its schema gives.

The daemon runs on an event loop of its own in a thread (its waiters, locks and connections belong to one loop;
schemathesis and hypothesis are synchronous); each case's request goes to it through httpx's ASGI transport.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from pagemind.runtime.process.settings import Settings
from pagemind.runtime.state.store import StateStore
from pagemind.scheduler.api.app import create_app
from pagemind.scheduler.catalog import AgentCatalog
from pagemind.scheduler.daemon import Daemon
from pagemind.scheduler.daemon_config import DaemonConfig
from tests.scheduler.api.test_api import KEEPER, TEMPLATE, scripted

MAX_EXAMPLES = 20  # per operation: about 20 operations, a few hundred requests in all (about 10 s)
TOKEN = "fuzz-admin-token"
# Path parameters that exist (an agent of the template, the folder's agent; their blocks), swapped into a case.
KNOWN = [
    {"name": "companion-u1", "label": "human"},
    {"name": "companion-u2", "label": "persona"},
    {"name": "keeper", "label": "human"},
    {"name": "companion-u1", "label": "rules"},
    {"name": "broken"},  # its YAML does not load: 503 agent_unavailable wherever a route names it
]
BROKEN = "name: broken\nmodel: {name: gpt-4o-mini}\nsystem: [not, a, string]\n"
# No 5xx but the documented 503 of an agent whose YAML does not load (asserted by hand, below).
CHECKS = [status_code_conformance, content_type_conformance, response_schema_conformance]


class Served:
    """A started daemon and its API on a loop in a thread; `request` sends one request to it and waits."""

    def __init__(self, tmp: Any):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.run(self._start(tmp))

    def run(self, coroutine: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(120)

    async def _start(self, tmp: Any) -> None:
        folder = tmp / "agents"
        folder.mkdir()
        (folder / "companion.yaml").write_text(TEMPLATE)
        (folder / "keeper.yaml").write_text(KEEPER)
        (folder / "broken.yaml").write_text(BROKEN)
        url = f"sqlite:///{tmp / 'pagemind.db'}"
        self.daemon = Daemon(
            AgentCatalog(folder, StateStore.open(url)),
            Settings(home=tmp / "home", database_url=url),
            model=scripted(),
            config=DaemonConfig(concurrency=4, poll_s=0.05),
        )
        self.daemon.pool.model.gate.set()  # type: ignore[union-attr]  # "slow" messages do not wait here
        await self.daemon.start()
        self.app = create_app(self.daemon, TOKEN, max_body=64 * 1024)
        self.client = httpx.AsyncClient(
            transport=httpx.ASGITransport(app=self.app),
            base_url="http://test",
            headers={"authorization": f"Bearer {TOKEN}"},
            timeout=60,
        )
        await self._make_agents()

    async def _make_agents(self) -> None:
        for name in ("companion-u1", "companion-u2"):  # agents whose names generated paths may hit (409: there)
            await self.client.post("/v1/agents", json={"template": "companion", "name": name})

    def make_agents(self) -> None:
        self.run(self._make_agents())

    def request(self, kwargs: dict[str, Any]) -> httpx.Response:
        return self.run(self.client.request(**kwargs))

    def close(self) -> None:
        self.run(self.client.aclose())
        self.run(self.daemon.stop(5))
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[Served]:
    server = Served(tmp_path_factory.mktemp("fuzz"))
    yield server
    server.close()


def as_httpx(kwargs: dict[str, Any]) -> dict[str, Any]:
    """The case's request (requests' keyword arguments) as httpx's."""
    out = {k: kwargs[k] for k in ("method", "url", "headers", "params") if kwargs.get(k) is not None}
    if kwargs.get("cookies"):  # per-request cookies: only when the operation has any
        out["cookies"] = kwargs["cookies"]
    if "json" in kwargs:
        out["json"] = kwargs["json"]
    elif kwargs.get("data") is not None:
        data = kwargs["data"]
        out["content" if isinstance(data, bytes | str) else "data"] = data
    if kwargs.get("files"):
        out["files"] = kwargs["files"]
    return out


def test_every_answer_is_documented(served):
    api = schemathesis.openapi.from_dict(served.app.openapi())
    headers = {"authorization": f"Bearer {TOKEN}"}
    failures: list[str] = []
    operations = 0
    for result in api.get_all_operations():
        operation = result.ok()
        operations += 1
        served.make_agents()  # again: an operation before may have deleted them

        @settings(
            max_examples=MAX_EXAMPLES,
            derandomize=True,
            deadline=None,
            database=None,
            phases=[Phase.explicit, Phase.generate],  # no shrinking: the failure as found is reported
            suppress_health_check=list(HealthCheck),
        )
        @given(case=operation.as_strategy(), known=st.sampled_from([{}, *KNOWN]))
        def check(case: Any, known: dict[str, str]) -> None:
            for parameter, value in known.items():  # half the cases name what exists: the routes past the 404
                if case.path_parameters and parameter in case.path_parameters:
                    case.path_parameters[parameter] = value
            if known and isinstance(case.body, dict) and "template" in case.body:
                case.body["template"] = "companion"  # and agents made from a template that exists
            kwargs = case.as_transport_kwargs(base_url="http://test", headers=headers)
            response = served.request(as_httpx(kwargs))
            case.validate_response(response, checks=CHECKS)
            if response.status_code >= 500:
                assert (response.status_code, response.json()["error"]["code"]) == (503, "agent_unavailable"), (
                    f"{case.method} {case.formatted_path}: {response.status_code} {response.text[:500]}"
                )

        try:
            check()
        except (Exception, BaseExceptionGroup) as exc:  # every operation is tried; the failures reported together
            failures.append(f"{operation.method.upper()} {operation.path}: {str(exc)[:1500]}")
    assert operations >= 15  # the document was read (every route of the API)
    assert not failures, "\n\n".join(failures)
