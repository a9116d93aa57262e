"""Group commit of archival inserts: concurrent inserts (of any agents of the process) share each step's write.

An insert takes four steps (`memory.ledger`): its row as 'inserting', its point, the superseded memory's mark,
its row made live. Done one insert at a time, every insert pays two SQL commits (each an fsync on Postgres) and one
vector-store write. Here the first insert to arrive becomes the leader: it takes every insert queued meanwhile and
runs each step once for all of them (one transaction for all rows, one upsert for all points, one transaction to
make them live), then takes the next batch, until none is left. A caller is answered when its own memory is live,
never sooner: the same order, the same crash points, and a crash anywhere leaves only states `memory.reconcile`
already finishes or undoes. One bad insert does not sink the others: a shared transaction that fails is retried
insert by insert, so only the one at fault fails.

No timer: a batch is whatever arrived while the previous one was being written (one insert alone is written at
once).
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from itertools import groupby
from typing import Any

import structlog

from pagemind.runtime.memory.archival.ledger import Ledger, new_token
from pagemind.runtime.memory.embedding.cache import write_cache_rows
from pagemind.runtime.memory.vectors.backend import AgentStore, ArchivalBackend
from pagemind.runtime.memory.vectors.records import MemoryRecord, StoredPoint, StoreError
from pagemind.runtime.process.crashpoints import crash_point

log = structlog.get_logger("pagemind.archival")


@dataclass
class PendingInsert:
    """One caller's insert, waiting for its batch."""

    ledger: Ledger
    store: AgentStore
    point: StoredPoint  # already the agent's own (AgentStore.owned)
    supersedes: str | None
    similarity: float | None
    detail: dict[str, Any]
    cache_rows: list[dict[str, Any]] = field(default_factory=list)  # the text's embedding, cached with the row
    token: str = field(default_factory=new_token)
    future: Future[bool] = field(default_factory=Future)

    @property
    def record(self) -> MemoryRecord:
        """The memory being inserted."""
        return self.point.record


class GroupCommit:
    """The leader/follower queue of one vector store (every agent of the process that writes to it)."""

    def __init__(self, backend: ArchivalBackend):
        self.backend = backend
        self._lock = threading.Lock()
        self._queue: list[PendingInsert] = []
        self._leading = False
        self.batches = 0  # batches written (tests and benchmarks read these)
        self.inserts = 0

    def insert(self, job: PendingInsert) -> None:
        """Write one insert with whatever others are queued; returns once its row is live (raises if it failed)."""
        with self._lock:
            self._queue.append(job)
            lead = not self._leading
            self._leading = True
        if lead:
            while True:
                with self._lock:
                    batch, self._queue = self._queue, []
                    if not batch:
                        self._leading = False
                        break
                self._write(batch)
        job.future.result()

    def _write(self, batch: list[PendingInsert]) -> None:
        self.batches += 1
        self.inserts += len(batch)
        if len(batch) > 1:
            log.debug("archival_group_commit", inserts=len(batch))
        # one database at a time; agents in id order, so two processes' batches lock revision rows in one order
        batch = sorted(batch, key=lambda j: (id(j.ledger.engine), j.store.agent_id))
        for _, same_db in groupby(batch, key=lambda j: id(j.ledger.engine)):
            jobs = list(same_db)
            try:
                jobs = self._begin(jobs)
                jobs = self._upsert(jobs)
                jobs = self._mark_superseded(jobs)
                self._complete(jobs)
            except BaseException as exc:  # a leader must never leave a follower waiting
                for job in jobs:
                    if not job.future.done():
                        job.future.set_exception(exc)
                if not isinstance(exc, Exception):
                    raise

    # -- the steps: each returns the jobs still going ------------------------------------------------------------

    def _together(self, jobs: list[PendingInsert], step: Callable[[Any, PendingInsert], None]) -> list[PendingInsert]:
        """Run `step` for every job in one transaction; if it fails, once per job in its own transaction."""
        engine = jobs[0].ledger.engine
        if len(jobs) > 1:
            try:
                with engine.begin() as conn:
                    for job in jobs:
                        step(conn, job)
                return jobs
            except Exception:
                log.warning("archival_group_commit_split", inserts=len(jobs))
        going = []
        for job in jobs:
            try:
                with engine.begin() as conn:
                    step(conn, job)
                going.append(job)
            except Exception as exc:
                job.future.set_exception(exc)
        return going

    def _begin(self, jobs: list[PendingInsert]) -> list[PendingInsert]:
        def step(conn: Any, job: PendingInsert) -> None:
            write_cache_rows(conn, job.cache_rows)
            job.ledger.begin_insert(job.record, job.token, job.supersedes, job.detail, conn=conn)

        jobs = self._together(jobs, step)
        for _ in jobs:
            crash_point("archival.insert.pending")
        return jobs

    def _upsert(self, jobs: list[PendingInsert]) -> list[PendingInsert]:
        if not jobs:
            return jobs
        points: dict[int, list[StoredPoint]] = {}
        for job in jobs:
            points.setdefault(job.store.agent_id, []).append(job.point)
        stores = {id(job.store): job.store for job in jobs}
        try:
            if len(stores) == 1:  # one agent's view: written through it, as an insert alone always was
                jobs[0].store.upsert([job.point for job in jobs])
            else:
                self.backend.upsert_all(points)
        except Exception as exc:
            for job in jobs:
                undo(job.store, job.ledger, job.record.id, None)
                job.future.set_exception(exc)
            return []
        for _ in jobs:
            crash_point("archival.insert.upserted")
        return jobs

    def _mark_superseded(self, jobs: list[PendingInsert]) -> list[PendingInsert]:
        going = []
        for job in jobs:
            if job.supersedes:
                try:
                    job.store.set_payload(
                        job.supersedes, {"superseded_by": job.record.id, "updated_at": job.record.created_at}
                    )
                    crash_point("archival.insert.superseded")
                except Exception as exc:
                    undo(job.store, job.ledger, job.record.id, job.supersedes)
                    job.future.set_exception(exc)
                    continue
            going.append(job)
        return going

    def _complete(self, jobs: list[PendingInsert]) -> None:
        if not jobs:
            return
        live: dict[str, bool] = {}

        def step(conn: Any, job: PendingInsert) -> None:
            live[job.record.id] = job.ledger.complete_insert(job.record.id, job.similarity, conn=conn)

        for job in self._together(jobs, step):
            if live.get(job.record.id):
                job.future.set_result(True)
                continue
            try:
                job.store.delete([job.record.id])  # forgotten by another process while being written
            except Exception:
                log.exception("archival_undo_failed", agent_id=job.ledger.agent_id, id=job.record.id)
            job.future.set_exception(StoreError(f"memory {job.record.id} was forgotten while it was being stored"))


def undo(store: AgentStore, ledger: Ledger, memory_id: str, old_id: str | None) -> None:
    """After a failed store write: take back what reached the store, then the row. If the store fails again, the
    row stays 'inserting' (invisible) for the next reconcile."""
    try:
        if old_id:
            store.set_payload(old_id, {"superseded_by": None})
        store.delete([memory_id])
    except Exception:
        log.exception("archival_undo_failed", agent_id=ledger.agent_id, id=memory_id)
        return
    ledger.rollback_insert(memory_id)


_COMMITS: weakref.WeakKeyDictionary[ArchivalBackend, GroupCommit] = weakref.WeakKeyDictionary()
_COMMITS_LOCK = threading.Lock()


def group_commit(backend: ArchivalBackend) -> GroupCommit:
    """The process's group commit for a store (one per store, shared by every agent writing to it)."""
    with _COMMITS_LOCK:
        commit = _COMMITS.get(backend)
        if commit is None:
            commit = _COMMITS[backend] = GroupCommit(backend)
        return commit
