"""A daemon and its API served on a local port from a thread of this process (its own event loop), so that the
official openai SDK, sync and async, talks to it over TCP as an app would; the agents' model is a scripted local
chat-completions server (tests/support/model_server.py).

The scripted agent: to a user's message it appends `[text]` to its `human` block (a memory tool call, which the
app must never see), then answers `echo: <text>` with send_message.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import uvicorn

from pagemind.runtime.model.client import OpenAIModelClient
from pagemind.runtime.process.settings import Settings
from pagemind.runtime.spec.agent import ModelSpec
from pagemind.runtime.state.keys import KeyStore
from pagemind.runtime.state.store import StateStore
from pagemind.scheduler.api.app import create_app
from pagemind.scheduler.catalog import AgentCatalog
from pagemind.scheduler.daemon import Daemon
from pagemind.scheduler.daemon_config import DaemonConfig
from tests.scheduler.test_serve import free_port
from tests.support.daemon_support import write_agents
from tests.support.model_server import StreamMode, last_turn_message, last_user_text, model_server, tool_call


def echo_agent(body: dict[str, Any]) -> dict[str, Any]:
    """The scripted agent's step (see the module docstring)."""
    text = last_user_text(body)
    if last_turn_message(body)["role"] == "user":
        return tool_call("core_memory_append", {"label": "human", "content": f"[{text[:40]}]"})
    return tool_call("send_message", {"message": f"echo: {text}"})


class _Listening(uvicorn.Server):
    """uvicorn's server, which says when it listens."""

    def __init__(self, config: uvicorn.Config):
        super().__init__(config)
        self.listening = asyncio.Event()

    async def startup(self, sockets: list[Any] | None = None) -> None:
        """Listen, then say so."""
        await super().startup(sockets)
        self.listening.set()


class Served:
    """The daemon and its API on `url`; `keys` made before it started (user -> key; `admin` an admin key)."""

    def __init__(self, folder: Path, settings: Settings, users: tuple[str, ...], max_body: int, config: dict[str, Any]):
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.store = StateStore.open(settings.database_url)
        keys = KeyStore(self.store.engine)
        self.keys = {user: keys.create(user)[1] for user in users}
        if users:
            self.keys["admin"] = keys.create(None, "admin")[1]
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}/v1"
        self.run(self._start(folder, settings, max_body, config))

    def run(self, coroutine: Any) -> Any:
        """Run a coroutine on the daemon's loop and wait for it."""
        return asyncio.run_coroutine_threadsafe(coroutine, self.loop).result(120)

    async def _start(self, folder: Path, settings: Settings, max_body: int, options: dict[str, Any]) -> None:
        catalog = AgentCatalog(folder, self.store)
        environ = {"OPENAI_BASE_URL": settings.openai_base_url or "", "OPENAI_API_KEY": "test"}
        model = OpenAIModelClient.from_spec(ModelSpec(name="gpt-4o-mini"), environ)
        config = DaemonConfig(**{"concurrency": 4, "poll_s": 0.05, "linger_s": 0.2, **options})
        self.daemon = Daemon(catalog, settings, config=config, model=model)
        await self.daemon.start()
        app = create_app(self.daemon, None, max_body=max_body)
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_config=None, lifespan="off")
        self.server = _Listening(config)
        self.serving = asyncio.ensure_future(self.server.serve())
        await self.server.listening.wait()

    async def _stop(self) -> None:
        self.server.should_exit = True
        await self.serving
        await self.daemon.stop(5)

    def user_messages(self, agent: str) -> list[str]:
        """The user messages stored for `agent`, oldest first."""
        record = self.store.get_agent(agent)
        assert record is not None, agent
        return [m.content or "" for m in self.store.all_messages(record.id) if m.role == "user"]

    def close(self) -> None:
        self.run(self._stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)


@contextmanager
def served(
    tmp: Path,
    database_url: str,
    *,
    users: tuple[str, ...] = (),
    stream: StreamMode = "sse",
    answer: Any = echo_agent,
    max_body: int = 1024 * 1024,
    **config: Any,
) -> Iterator[Served]:
    """A daemon over `database_url` serving the `companion` template and the YAML agent `alice`, its model the
    scripted agent (`stream`: how that server meets `stream: true`), with keys for `users` (none: no auth);
    `config`: `DaemonConfig` fields."""
    folder = write_agents(tmp / "agents")
    with model_server(answer, stream=stream) as model_url:
        settings = Settings(
            home=tmp / "home", database_url=database_url, openai_base_url=model_url, openai_api_key="test"
        )
        server = Served(folder, settings, users, max_body, config)
        try:
            yield server
        finally:
            server.close()
