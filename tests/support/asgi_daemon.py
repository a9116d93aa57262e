"""A started daemon behind its HTTP app, for tests that talk to it through `httpx.ASGITransport`: agent YAML files
in a folder, a scripted model, optional per-user keys. What the API, forget, purge and memory-page tests share."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from pagemind.runtime.memory.vectors.stores import close_all
from pagemind.runtime.process.settings import Settings
from pagemind.runtime.state.keys import KeyStore
from pagemind.runtime.state.store import StateStore
from pagemind.scheduler.api.app import create_app
from pagemind.scheduler.api.auth import KeyRing
from pagemind.scheduler.catalog import AgentCatalog
from pagemind.scheduler.daemon import Daemon
from pagemind.scheduler.daemon_config import DaemonConfig


@dataclass
class Served:
    """The client on the app, the daemon, where its state lives, and each user's key (by user name)."""

    client: httpx.AsyncClient
    daemon: Daemon
    home: Path
    database_url: str
    keys: dict[str, str] = field(default_factory=dict)
    keyring: KeyRing | None = None


@asynccontextmanager
async def asgi_daemon(
    tmp_path: Path,
    database_url: str,
    files: Mapping[str, str],
    model: Any,
    *,
    token: str | None = None,
    users: Sequence[str] = (),
    concurrency: int = 2,
    max_body: int | None = None,
) -> AsyncIterator[Served]:
    """Write `files` (file name → YAML) into an agents folder, start a daemon on it over `database_url` with
    `model`, make a key for each of `users` (then every request needs a key, or `token` for the admin), and yield
    the app's client; the daemon is stopped and the embedded vector stores closed after."""
    folder = tmp_path / "agents"
    folder.mkdir()
    for name, text in files.items():
        (folder / name).write_text(text)
    home = tmp_path / "home"
    store = StateStore.open(database_url)
    daemon = Daemon(
        AgentCatalog(folder, store),
        Settings(home=home, database_url=database_url),
        model=model,
        config=DaemonConfig(concurrency=concurrency, poll_s=0.05),
    )
    keys = KeyStore(store.engine)
    made = {user: keys.create(user)[1] for user in users}
    await daemon.start()
    keyring = KeyRing(keys, token, required=True) if users else None
    options: dict[str, Any] = {"keyring": keyring} if keyring else {}
    if max_body is not None:
        options["max_body"] = max_body
    app = create_app(daemon, token, **options)
    try:
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
            yield Served(client, daemon, home, database_url, made, keyring)
    finally:
        await daemon.stop(5)
        close_all()
