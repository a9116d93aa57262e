"""Reconcile: bring one agent's archival rows and vector-store points back into agreement after a crash.

The archival service runs it when it first opens the store for an agent (once per process and store), after the
re-keying of old points and before any read or write. SQL says what was meant (the write order is in
`memory.ledger`):

- an 'inserting' row whose point exists is completed: the memory it supersedes is marked in the store, then the
  row is made live (steps 3 and 4 of the insert, both idempotent);
- an 'inserting' row whose point is absent is rolled back (its caller was never answered). The embedded store has
  one writer process, so there every such row is; on a shared Qdrant server another process may be between steps 1
  and 2 of that very insert, so only rows older than `GRACE` are (younger ones stay invisible until a later open);
- a live row with a write token (a refresh or hit count cut short) has its payload set again from the row; when
  the point's text differs from the row's (a rewrite in place cut short), the point is written again whole,
  embedded again from the row's text;
- a 'forgetting' row (a forget cut short) has its point deleted, then goes with its history;
- points with no row at all are deleted when they carry this database's identity (`origin`: only a writer on a
  shared server that stalled past the grace and then died can leave one). Others are left alone and counted
  (`foreign`): points an older pagemind wrote (it wrote the point before the row, so a crash could leave one,
  but it wrote no identity) cannot be told from another database's points in a store shared by mistake, and
  deleting those would lose that database's memories. Search never shows a point without a live row, so they
  are invisible either way;
- live rows with no point (a crash under an older pagemind; or every live row, when the embedding model changed
  and this model's store is new) get their point back, embedded again from their text (`memory.reembed`: in
  batches, with progress; a crash part-way leaves the rest missing, for the next open).

A crash during a reconcile leaves states of the same kinds, so the next one finishes the job.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from typing import Any

import structlog

from pagemind.runtime.memory.archival.ledger import Ledger
from pagemind.runtime.memory.archival.ledger_reads import FORGETTING, INSERTING, LIVE, record_of
from pagemind.runtime.memory.archival.reembed import reembed
from pagemind.runtime.memory.vectors.backend import AgentStore, ArchivalBackend
from pagemind.runtime.memory.vectors.records import MemoryRecord, StoredPoint
from pagemind.runtime.process.crashpoints import crash_point
from pagemind.runtime.state.records import aware, utcnow

log = structlog.get_logger("pagemind.archival")

GRACE = timedelta(minutes=10)  # far longer than any insert's steps 1-2 take; only matters on a shared server

Restore = Callable[[list[MemoryRecord]], list[StoredPoint]]

_DONE: weakref.WeakKeyDictionary[ArchivalBackend, set[tuple[str, int]]] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


@dataclass
class Reconciled:
    """What a reconcile did."""

    completed: int = 0
    rolled_back: int = 0
    waiting: int = 0
    resynced: int = 0
    forgotten: int = 0
    orphans: int = 0
    foreign: int = 0
    restored: int = 0


def reconcile(
    ledger: Ledger,
    store: AgentStore,
    *,
    exclusive: bool,
    restore: Restore | None = None,
    now: datetime | None = None,
    grace: timedelta = GRACE,
    model: str = "",
) -> Reconciled:
    """Finish or undo what a crash left half-written for the agent (see the module's docstring). `exclusive`:
    no other process can be writing this store (the embedded one); `now` is wall-clock time; `model` names the
    embedding model `restore` uses (for the re-embed's progress)."""
    now = now or utcnow()
    done = Reconciled()
    unsettled = ledger.rows(unsettled=True)
    stored = {r.id: r for r in store.get([row["id"] for row in unsettled])} if unsettled else {}
    for row in unsettled:
        if row["state"] == INSERTING:
            _settle_insert(ledger, store, row, row["id"] in stored, exclusive, now - grace, done)
        elif row["state"] == FORGETTING:
            store.delete([row["id"]])
            ledger.end_forget(row["id"])
            crash_point("archival.reconcile.forgotten")
            done.forgotten += 1
        else:
            record = record_of(row)
            if row["id"] in stored and stored[row["id"]].text != record.text and restore is not None:
                store.upsert(restore([record]))  # a rewrite cut short: the point needs the new vector too
            elif row["id"] in stored:
                store.set_payload(row["id"], _fields(record))
            ledger.settle([row["id"]], row["write_token"])
            crash_point("archival.reconcile.resynced")
            done.resynced += 1
    # Points first, rows second: a point is only ever written after its row, so a point seen before the rows were
    # read that has no row among them was not about to get one.
    origins = store.origins()
    points, rows = set(origins), ledger.ids()
    orphans = sorted(i for i in points - rows if origins[i] == ledger.origin())
    if orphans:
        crash_point("archival.reconcile.orphans_found")
        store.delete(orphans)
        done.orphans = len(orphans)
    done.foreign = len(points - rows) - len(orphans)
    missing = [record_of(r) for r in ledger.rows(sorted(rows - points)) if r["state"] == LIVE] if rows - points else []
    if missing and restore is not None:
        done.restored = reembed(store, missing, restore, model=model)
    if any(asdict(done).values()):
        log.warning("archival_reconciled", agent_id=ledger.agent_id, **asdict(done))
    return done


def _settle_insert(
    ledger: Ledger, store: AgentStore, row: Any, present: bool, exclusive: bool, cutoff: datetime, done: Reconciled
) -> None:
    if present:
        if row["supersedes"]:
            store.set_payload(row["supersedes"], {"superseded_by": row["id"], "updated_at": aware(row["created_at"])})
        ledger.complete_insert(row["id"])
        crash_point("archival.reconcile.completed")
        done.completed += 1
    elif exclusive or row["write_started"] is None or aware(row["write_started"]) < cutoff:
        ledger.rollback_insert(row["id"])
        crash_point("archival.reconcile.rolled_back")
        done.rolled_back += 1
    else:
        done.waiting += 1


def _fields(record: MemoryRecord) -> dict[str, Any]:
    return {k: v for k, v in record.payload().items() if k not in {"agent_id", "payload_version"}}


def reconcile_once(
    ledger: Ledger, store: AgentStore, backend: ArchivalBackend, *, restore: Restore | None = None, model: str = ""
) -> Reconciled | None:
    """`reconcile` the first time this process opens `backend` for the agent (in this database); None after."""
    key = (ledger.engine.url.render_as_string(hide_password=True), ledger.agent_id)
    with _LOCK:
        seen = _DONE.setdefault(backend, set())
        if key in seen:
            return None
        result = reconcile(ledger, store, exclusive=backend.exclusive, restore=restore, model=model)
        seen.add(key)
        return result
