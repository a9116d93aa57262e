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
import re
import threading
from pathlib import Path

import structlog

from pagemind.runtime.memory.vectors.backend import ArchivalBackend
from pagemind.runtime.memory.vectors.edge import EdgeBackend
from pagemind.runtime.memory.vectors.server import ServerBackend

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
