"""Where archival memories live: the process's vector store, opened once and shared by every agent in it.

- `EdgeBackend` (memory.edge): Qdrant Edge, Qdrant's in-process engine, one shard on disk under
  `$PAGEMIND_HOME/qdrant/<model>-<dim>`. The default.
- `ServerBackend` (memory.server): `qdrant-client` against a Qdrant server or cluster (`QDRANT_URL`).

Both hold every agent's memories (one shard/collection per embedding model, `agent_id` a tenant keyword index),
with a named dense vector `dense` (cosine) and a sparse vector `bm25` (IDF modifier; terms from Qdrant's own
`Bm25`, so the same sparse vectors work on both sides). Callers reach a backend only through an `AgentStore`
(memory.backend), bound to one agent.
"""

from __future__ import annotations

import atexit
import json
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import structlog

from pagemind.runtime.memory.vectors.backend import ArchivalBackend
from pagemind.runtime.memory.vectors.edge import EdgeBackend
from pagemind.runtime.memory.vectors.edge_rewrite import FRESH, RETIRED
from pagemind.runtime.memory.vectors.records import StoreError
from pagemind.runtime.memory.vectors.server import ServerBackend, erase_in_collection
from pagemind.runtime.process.crashpoints import crash_point

log = structlog.get_logger("pagemind.archival_store")

_OPEN: dict[str, ArchivalBackend] = {}
_OPEN_LOCK = threading.Lock()


def store_name(model_id: str, dim: int) -> str:
    """The shard folder / collection name for an embedding model and dimension."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", f"{model_id}-{dim}")


def open_backend(
    home: Path, dim: int, model_id: str, qdrant_url: str | None = None, qdrant_api_key: str | None = None
) -> ArchivalBackend:
    """The process's store for this model: a Qdrant server when `qdrant_url` is set, else the embedded shard
    under `home/qdrant/`. Opened once per process and shared by every agent in it."""
    name = store_name(model_id, dim)
    key = f"{qdrant_url}#{name}" if qdrant_url else str((Path(home) / "qdrant" / name).resolve())
    with _OPEN_LOCK:
        backend = _OPEN.get(key)
        if backend is None:
            backend = (
                ServerBackend.connect(qdrant_url, qdrant_api_key, f"pagemind_{name}", dim)
                if qdrant_url
                else EdgeBackend(Path(key), dim)
            )
            _OPEN[key] = backend
        return backend


def erase_agents(
    home: Path,
    keys: dict[int, list[str]],
    qdrant_url: str | None = None,
    qdrant_api_key: str | None = None,
    *,
    rewrite: bool = False,
) -> dict[int, int]:
    """Delete the agents' points (`keys`: agent id -> its tenant key and any names its points were keyed by) from
    every store this configuration has: every embedded shard under `home/qdrant/` (one per embedding model ever
    used), each then rewritten without them (`EdgeBackend.compact`), or every pagemind collection of the Qdrant
    server (which keeps their bytes until its optimizer runs). A shard is rewritten when it had any of their points,
    or always with `rewrite` (a purge resumed: its points may be deleted already, their bytes not yet gone). How
    many points each agent had."""
    backends = every_store(home, qdrant_url, qdrant_api_key)
    counts = dict.fromkeys(keys, 0)
    for backend in backends:
        deleted = 0
        for agent_id, agent_keys in keys.items():
            deleted += (found := backend.delete_agents(agent_keys))
            counts[agent_id] += found
        crash_point("purge.points_deleted")
        if deleted or rewrite:
            backend.compact()
        crash_point("purge.store_compacted")
        if isinstance(backend, _Collection):
            backend.close()
    return counts


def every_store(home: Path, qdrant_url: str | None = None, qdrant_api_key: str | None = None) -> list[ArchivalBackend]:
    """Every vector store this configuration has, opened: `StoreLocked`, `StoreError`."""
    return _server_collections(qdrant_url, qdrant_api_key) if qdrant_url else _edge_shards(home)


def check_stores(home: Path, qdrant_url: str | None = None, qdrant_api_key: str | None = None) -> None:
    """Open every vector store this configuration has (a purge does before it records anything, so that a shard
    another process holds, or a server that does not answer, fails it before the agent is hidden)."""
    for store in every_store(home, qdrant_url, qdrant_api_key):
        if isinstance(store, _Collection):  # listed only to know the server answers
            store.close()


def _edge_shards(home: Path) -> list[ArchivalBackend]:
    root = Path(home) / "qdrant"
    names = {p.parent.name.removesuffix(FRESH).removesuffix(RETIRED) for p in root.glob("*/edge_config.json")}
    return [_edge_at(root / name) for name in sorted(names)]


def _edge_at(folder: Path) -> ArchivalBackend:
    """The shard at `folder`, as this process has it open (or opens it now, its size read from its config)."""
    key = str(folder.resolve())
    with _OPEN_LOCK:
        backend = _OPEN.get(key)
        if backend is None:
            config = folder / "edge_config.json"
            if not config.exists():
                config = folder.with_name(folder.name + FRESH) / "edge_config.json"  # a rewrite cut short
            dim = int(json.loads(config.read_text())["vectors"]["dense"]["size"])
            backend = _OPEN[key] = EdgeBackend(folder, dim)
        return backend


def _server_collections(url: str, api_key: str | None) -> list[ArchivalBackend]:
    with _OPEN_LOCK:
        opened = [b for k, b in _OPEN.items() if k.startswith(f"{url}#")]
    if url == ":memory:":  # qdrant-client's local test double: only the collections this process opened exist
        return opened
    from qdrant_client import QdrantClient

    try:
        client = QdrantClient(url=url, api_key=api_key, check_compatibility=False)  # (its warning says nothing here)
        names = [c.name for c in client.get_collections().collections if c.name.startswith("pagemind_")]
    except Exception as exc:  # refused, unauthorised, timed out: one line that names the server
        raise StoreError(f"cannot reach the Qdrant server at {url}: {_first_line(exc)}") from None
    return [_Collection(client, name) for name in names]


def _first_line(exc: BaseException) -> str:
    return (str(exc) or type(exc).__name__).splitlines()[0]


class _Collection(ServerBackend):
    """A pagemind collection on a server, for erasure only (whatever its model: no size to know)."""

    def __init__(self, client: Any, collection: str):  # no super().__init__: it would create or upgrade it
        self.client, self.collection, self.location = client, collection, collection

    def delete_agents(self, keys: Sequence[str]) -> int:
        try:
            return erase_in_collection(self.client, self.collection, keys)
        except Exception as exc:
            raise StoreError(f"cannot erase from the Qdrant collection {self.collection}: {_first_line(exc)}") from None


def close_all() -> None:
    """Close every store this process opened (at exit, and between tests that reopen a shard)."""
    with _OPEN_LOCK:
        backends = list(_OPEN.values())
        _OPEN.clear()
    for backend in backends:
        try:
            backend.close()
        except Exception:  # closing at exit must not mask the real error
            log.exception("archival_store_close_failed", location=backend.location)


atexit.register(close_all)
