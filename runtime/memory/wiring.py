"""Wiring of an agent's external memory: its archival and recall services, from settings and its spec.

Cheap to call: the embedding model and the vector store open on first use, so loading an agent, compiling its
prompt (archival statistics come from SQL) and inspecting it never touch them. What can be shared is shared by
every agent of the process: the embedder with its cache (one per database and embedding configuration), the
vector store (`stores.open_backend`); an agent's own services hold only its id and small state.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from datetime import datetime

from sqlalchemy.engine import Engine

from pagemind.runtime.memory.archival.memory import ArchivalService
from pagemind.runtime.memory.embedding.cache import CachedEmbedder
from pagemind.runtime.memory.embedding.configured import build_embedder
from pagemind.runtime.memory.recall.memory import RecallService
from pagemind.runtime.memory.topics import MutedTopics
from pagemind.runtime.memory.vectors.backend import ArchivalBackend
from pagemind.runtime.memory.vectors.stores import open_backend
from pagemind.runtime.process.settings import Settings
from pagemind.runtime.spec.agent import AgentSpec
from pagemind.runtime.state.records import AgentRecord
from pagemind.runtime.state.store import StateStore

ARCHIVAL_TOOLS = frozenset({"archival_memory_insert", "archival_search"})


_EMBEDDERS: weakref.WeakKeyDictionary[Engine, dict[tuple[object, ...], CachedEmbedder]] = weakref.WeakKeyDictionary()
_EMBEDDERS_LOCK = threading.Lock()


def shared_embedder(settings: Settings, engine: Engine) -> CachedEmbedder:
    """The process's cached embedder for this database and embedding configuration, built on first use. Its
    in-process cache (up to 20,000 vectors, ~30 MB when full) is then paid once, not once per agent; it goes
    when the engine does (a test's database, say)."""
    key = (
        settings.embedding_model,
        settings.embedding_base_url,
        settings.embedding_api_key,
        settings.embedding_dim,
        settings.models_dir,
        settings.home,
    )
    with _EMBEDDERS_LOCK:
        embedders = _EMBEDDERS.get(engine)
        if embedders is None:
            embedders = _EMBEDDERS[engine] = {}
        if key not in embedders:
            # A proxy, not the engine: the cache's entry must not keep its own key alive.
            embedders[key] = build_embedder(settings, weakref.proxy(engine))
        return embedders[key]


def backend_opener(settings: Settings, embedder: CachedEmbedder) -> Callable[[], ArchivalBackend]:
    """A function that opens (once per process) the vector store configured by `settings` for this embedder."""
    return lambda: open_backend(
        settings.home, embedder.dim, embedder.model_id, settings.qdrant_url, settings.qdrant_api_key
    )


def build_external_memory(
    spec: AgentSpec, record: AgentRecord, store: StateStore, settings: Settings, clock: Callable[[], datetime]
) -> tuple[ArchivalService | None, RecallService]:
    """(archival, recall) for an agent. Archival memory exists when the spec enables it and lists an archival
    tool; recall memory (the message log) always does. With no `memory.retrieval` preset, thresholds the YAML
    leaves at their defaults are the embedding model's own (`MemoryConfig.archival_for`)."""
    embedder = shared_embedder(settings, store.engine)
    config = spec.memory.archival_for(getattr(embedder, "thresholds", {}))
    recall = RecallService(
        record.id,
        engine=store.engine,
        embedder=embedder,
        config=config,
        clock=clock,
        session_gap_hours=spec.memory.session_gap_hours,
    )
    recall.mutes = MutedTopics(record.id, store.engine, embedder, clock)
    if not (config.enabled and ARCHIVAL_TOOLS & set(spec.tools)):
        return None, recall
    return archival_service(spec, store, settings, clock, embedder, record), recall


def archival_service(
    spec: AgentSpec,
    store: StateStore,
    settings: Settings,
    clock: Callable[[], datetime],
    embedder: CachedEmbedder | None = None,
    record: AgentRecord | None = None,
) -> ArchivalService:
    """The agent's archival memory, whatever its tools (inspection and deletion from the CLI), keyed by the
    agent's id: `record`, or the stored agent named in `spec` (created if it was never run)."""
    embedder = embedder or shared_embedder(settings, store.engine)
    record = record or store.get_agent(spec.name) or store.ensure_agent(spec)
    config = spec.memory.archival_for(getattr(embedder, "thresholds", {}))
    service = ArchivalService(
        record.id,
        engine=store.engine,
        open_backend=backend_opener(settings, embedder),
        embedder=embedder,
        config=config,
        clock=clock,
        user_id=record.owner,  # the tenancy field of every memory it stores (its point's payload too)
    )
    service.mutes = MutedTopics(record.id, store.engine, embedder, clock)
    return service
