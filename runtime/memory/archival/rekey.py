"""Re-keying vector-store points written before the agent's id was their key (the second half of migration 0002).

Migration 0002 moved archival memory's SQL rows from the agent's name to its id and recorded, in
`archival_rekeys`, every agent's old key (its name) with its id. A vector store can only be changed by a process
that opens it, so the archival service calls `complete_rekeys` when it first opens a store, before any read or
write: each old key's points get the id (`ArchivalBackend.rekey`), then the store is noted in
`archival_rekeyed_stores` and never looked at again.

Crash-safe without bookkeeping of its own: a point is moved at most once (the move marks it with
`payload_version`, and only unmarked points are matched), so running it again after a crash half-way moves what
is left and nothing else; the store is noted only after every key is done. Unmarked points can never be written
again, so a name that looks like another agent's id (an agent called "2") cannot capture that agent's points.
"""

from __future__ import annotations

import threading

import structlog
from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError

from pagemind.runtime.memory.vectors.backend import ArchivalBackend
from pagemind.runtime.state.records import utcnow
from pagemind.runtime.state.tables.archival import archival_rekeyed_stores, archival_rekeys

log = structlog.get_logger("pagemind.archival")

_DONE: set[tuple[str, str]] = set()  # (database, store) pairs known complete in this process
_LOCK = threading.Lock()
_STORE_CHARS = 512


def complete_rekeys(engine: Engine, backend: ArchivalBackend) -> int:
    """Re-key `backend`'s points recorded as pending in `engine`'s database, once per store; returns how many
    old keys were processed (0 when the store was already done)."""
    store = backend.location[:_STORE_CHARS]
    key = (engine.url.render_as_string(hide_password=True), store)
    if key in _DONE:
        return 0
    with _LOCK:
        if key in _DONE:
            return 0
        with engine.connect() as conn:
            done = (
                conn.execute(
                    select(archival_rekeyed_stores.c.store).where(archival_rekeyed_stores.c.store == store)
                ).first()
                is not None
            )
            pending = (
                []
                if done
                else conn.execute(
                    select(archival_rekeys.c.old_key, archival_rekeys.c.agent_id).order_by(archival_rekeys.c.agent_id)
                ).all()
            )
        for old_key, agent_id in pending:
            backend.rekey(old_key, agent_id)
        if not done:
            _mark_done(engine, store)
            if pending:
                log.info("archival_rekeyed", store=store, keys=len(pending))
        _DONE.add(key)
        return len(pending)


def _mark_done(engine: Engine, store: str) -> None:
    try:
        with engine.begin() as conn:
            conn.execute(archival_rekeyed_stores.insert(), [{"store": store, "at": utcnow()}])
    except IntegrityError:  # another process completed the same store at the same time: same outcome
        pass
