"""The embedded archival store: Qdrant Edge, Qdrant's in-process engine, one shard on disk.

The shard lives under `$PAGEMIND_HOME/qdrant/<model>-<dim>` (WAL on) and holds every agent (tenant index on
`agent_id`, one HNSW graph per agent and int8 copies of the vectors: `memory.index`). One writer process: a second
one gets a clear `StoreLocked` error naming the process that holds it.

Durability: an update is in the shard's write-ahead log when `update` returns, which a crash of this process
cannot take (the next open replays it); `flush` (fsync of the WAL and the segments, 10–30 ms) runs after each
optimization and at close, not after every write. What a power loss takes from the newest writes SQL still has
(it is the record: `memory.ledger`), and `memory.reconcile` puts those points back from it at the next open.

Qdrant Edge runs no optimizer of its own: once `PLAN.indexing_points(dim)` points were written since the last one,
the backend starts `optimize` on a thread of its own (it holds the GIL while it indexes: the process pauses for
about as long; see bench/RESULTS.md), which turns the appendable segment into an indexed one.

The shard's configuration and opening are `edge_shard`; a rewrite of the shard (compaction) is `edge_rewrite`;
filters are translated in `edge_filter`.
"""

from __future__ import annotations

import os
import threading
import time
import uuid
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import structlog

from pagemind.runtime.memory.vectors.backend import ArchivalBackend
from pagemind.runtime.memory.vectors.edge_filter import to_edge_filter
from pagemind.runtime.memory.vectors.edge_rewrite import recover_rewrite, swap_in_fresh_shard, write_fresh_shard
from pagemind.runtime.memory.vectors.edge_shard import PAYLOADS_IN_RAM, PID_FILE, open_shard, shard_config
from pagemind.runtime.memory.vectors.index import PLAN, IndexPlan
from pagemind.runtime.memory.vectors.records import (
    DENSE,
    PAYLOAD_VERSION,
    SPARSE,
    Hit,
    MemoryFilter,
    MemoryRecord,
    Sparse,
    StoredPoint,
    StoreError,
    tenant_key,
    to_epoch,
)
from pagemind.runtime.process.crashpoints import crash_point

log = structlog.get_logger("pagemind.archival_store")

FLUSH_EVERY = 1000  # updates between flushes (10–30 ms each) besides the one after every optimization


class EdgeBackend(ArchivalBackend):
    """Qdrant Edge: one shard directory, every agent in it (tenant index on `agent_id`), WAL on."""

    name = "qdrant-edge"
    exclusive = True  # the shard's WAL lock keeps every other process out

    def __init__(self, folder: Path, dim: int, plan: IndexPlan = PLAN, *, auto_optimize: bool = True):
        import qdrant_edge as qe

        self.qe = qe
        self.folder = Path(folder)
        self.location = str(self.folder)
        self.dim = dim
        self.plan = plan
        self.auto_optimize = auto_optimize
        self._lock = threading.Lock()
        self._optimizing = threading.Lock()  # one optimization at a time
        self.optimizer: threading.Thread | None = None  # the last optimization started on its own
        self._since_flush = 0  # updates since the last flush
        recover_rewrite(self.folder)
        self._payloads_in_ram = plan.payload_in_ram and (self.folder / PAYLOADS_IN_RAM).exists()
        self.shard = self._open()
        info = self.shard.info()
        self._place_payloads(info.points_count)
        self._unindexed = max(0, info.points_count - info.indexed_vectors_count)  # written since the last optimize
        self._params = self._search_params(plan.hnsw_ef)
        self._exact = qe.SearchParams(exact=True)
        (self.folder / PID_FILE).write_text(str(os.getpid()))
        log.info(
            "archival_store_open",
            backend=self.name,
            path=self.location,
            dim=dim,
            points=info.points_count,
            unindexed=self._unindexed,
        )

    def _search_params(self, ef: int) -> Any:
        return self.qe.SearchParams(
            hnsw_ef=ef, quantization=self.qe.QuantizationSearchParams(rescore=True, oversampling=self.plan.oversampling)
        )

    def _place_payloads(self, points: int) -> None:
        """Keep payloads in RAM from now on once the shard holds `plan.payload_in_ram_from` points: reopen it with
        that setting, which the segments built from then on take (the optimizer rebuilds the older ones as it
        merges them). Remembered in the folder, so a later open starts that way. The caller holds the shard."""
        if self._payloads_in_ram or not self.plan.payload_in_ram or points < self.plan.payload_in_ram_from:
            return
        self._payloads_in_ram = True
        self.shard.flush()
        self.shard.close()
        self.shard = self._open()
        (self.folder / PAYLOADS_IN_RAM).touch()
        log.info("archival_store_payloads_in_ram", backend=self.name, path=self.location, points=points)

    def _config(self) -> Any:
        """The shard's configuration (`edge_shard.shard_config`; a benchmark's backend changes it)."""
        return shard_config(self.qe, self.dim, self.plan, self._payloads_in_ram)

    def _open(self) -> Any:
        return open_shard(self.qe, self.folder, self._config)

    def _point(self, point: StoredPoint) -> Any:
        qe = self.qe
        vectors = {DENSE: np.asarray(point.dense, dtype=np.float32)}
        if point.sparse.indices:
            vectors[SPARSE] = qe.SparseVector(point.sparse.indices, point.sparse.values)
        return qe.Point(uuid.UUID(point.record.id), vectors, self.sealed_payload(point))

    def upsert(self, agent_id: int, points: Sequence[StoredPoint]) -> None:
        self.upsert_all({agent_id: list(points)})

    def upsert_all(self, points: dict[int, list[StoredPoint]]) -> None:
        if any(p.record.agent_id != agent_id for agent_id, some in points.items() for p in some):
            raise StoreError("refusing to write another agent's memory")
        structs = [self._point(p) for some in points.values() for p in some]
        with self._lock:
            self.shard.update(self.qe.UpdateOperation.upsert_points(structs))
            crash_point("edge.upsert.unflushed")  # in the WAL: a crash of this process keeps it
            self._updated()
        self._written(len(structs))

    def _updated(self) -> None:
        """Count an update (under the lock); every FLUSH_EVERY of them, flush: the WAL a reopen replays stays
        short even in a process that only counts hits and never writes enough points to optimize."""
        self._since_flush += 1
        if self._since_flush >= FLUSH_EVERY:
            self.shard.flush()
            self._since_flush = 0

    def _written(self, count: int) -> None:
        self._unindexed += count
        if (
            self.auto_optimize
            and self._unindexed >= self.plan.indexing_points(self.dim)
            and not self._optimizing.locked()
        ):
            self.optimizer = threading.Thread(target=self.optimize, name="pagemind-edge-optimize", daemon=True)
            self.optimizer.start()

    def optimize(self) -> bool:
        """Index what was written since the last optimization (Qdrant's optimizers, in this process), then flush.
        True if any segment changed. Searches meanwhile see every point (the old segments serve until the new
        one replaces them)."""
        with self._optimizing:
            if self.shard is None:
                return False
            with self._lock:  # before the segments are built, so that a shard grown large builds them in RAM
                self._place_payloads(self.shard.info().points_count)
            pending, started = self._unindexed, time.perf_counter()
            changed = bool(self.shard.optimize())
            self.shard.flush()
            self._unindexed = max(0, self._unindexed - pending)
            log.info(
                "archival_store_optimized",
                backend=self.name,
                points=pending,
                changed=changed,
                seconds=round(time.perf_counter() - started, 3),
            )
            return changed

    def _query(self, agent_id: int, query: Any, flt: MemoryFilter, limit: int, params: Any = None) -> list[Hit]:
        qe = self.qe
        request = qe.QueryRequest(
            limit=limit,
            query=query,
            filter=to_edge_filter(agent_id, flt),
            with_payload=True,
            with_vector=False,
            params=params,
        )
        with self._lock:
            points = self.shard.query(request)
        return [Hit(self.record_of(p.id, p.payload), float(p.score)) for p in points]

    def search_dense(
        self,
        agent_id: int,
        vector: np.ndarray,
        flt: MemoryFilter,
        limit: int,
        exact: bool = False,
        ef: int | None = None,
    ) -> list[Hit]:
        query = self.qe.Query.Nearest(np.asarray(vector, dtype=np.float32).tolist(), using=DENSE)
        params = self._exact if exact else self._params if ef is None else self._search_params(ef)
        return self._query(agent_id, query, flt, limit, params)

    def search_hybrid(
        self, agent_id: int, dense: np.ndarray | None, sparse: Sparse | None, flt: MemoryFilter, limit: int
    ) -> tuple[list[Hit], list[Hit]]:
        qe = self.qe
        edge_filter = to_edge_filter(agent_id, flt)
        keyword, nearest = None, None if dense is None else np.asarray(dense, dtype=np.float32).tolist()
        requests = []
        if nearest is not None:
            requests.append(
                qe.QueryRequest(
                    limit=limit,
                    query=qe.Query.Nearest(nearest, using=DENSE),
                    filter=edge_filter,
                    with_payload=True,
                    with_vector=False,
                    params=self._params,
                )
            )
        if sparse is not None and sparse.indices:
            keyword = qe.Query.Nearest(qe.SparseVector(sparse.indices, sparse.values), using=SPARSE)
            # with a dense query, the keyword hits' payloads come with their cosine (`_keyword_cosines`)
            requests.append(
                qe.QueryRequest(
                    limit=limit, query=keyword, filter=edge_filter, with_payload=nearest is None, with_vector=False
                )
            )
        if not requests:
            return [], []
        with self._lock:
            answers = self.shard.query_batch(qe.QueryBatchRequest(requests))
        dense_hits = (
            [Hit(self.record_of(p.id, p.payload), float(p.score)) for p in answers[0]] if nearest is not None else []
        )
        if keyword is None:
            return dense_hits, []
        if nearest is None:
            return [], [Hit(self.record_of(p.id, p.payload), float(p.score)) for p in answers[0]]
        return dense_hits, self._keyword_cosines(nearest, agent_id, dense_hits, answers[1])

    def _keyword_cosines(
        self, nearest: list[float], agent_id: int, dense_hits: list[Hit], keyword_points: Sequence[Any]
    ) -> list[Hit]:
        """The keyword hits with their records and their cosine to the query, which fusion needs. A hit the dense
        side found too takes its record and score from there; the others are scored exactly (float32 originals, as
        the dense side's rescoring) in one more query that reads their payloads. A prefetch in the batch ran the
        keyword search again and read the shared hits' payloads twice: the same cost where the retrievers rarely
        agree (bench/RESULTS.md, branch search5), more where they do; reading the vectors out costs ~0.2 ms each."""
        qe = self.qe
        found = {h.record.id: h for h in dense_hits}
        keys = [(str(p.id), p) for p in keyword_points]
        others = [key for key, _ in keys if key not in found]
        if others:  # (they passed the search's filter in the keyword query; the agent is named again all the same)
            request = qe.QueryRequest(
                limit=len(others),
                query=qe.Query.Nearest(nearest, using=DENSE),
                filter=to_edge_filter(agent_id, MemoryFilter(ids=others)),
                with_payload=True,
                with_vector=False,
                params=self._exact,
            )
            with self._lock:
                scored = self.shard.query(request)
            for p in scored:
                record = self.record_of(p.id, p.payload)
                found[record.id] = Hit(record, float(p.score))
        # a hit gone since the keyword query (forgotten meanwhile) is left out
        return [Hit(hit.record, float(p.score), hit.score) for key, p in keys if (hit := found.get(key)) is not None]

    def search_sparse(self, agent_id: int, vector: Sparse, flt: MemoryFilter, limit: int) -> list[Hit]:
        query = self.qe.Query.Nearest(self.qe.SparseVector(vector.indices, vector.values), using=SPARSE)
        return self._query(agent_id, query, flt, limit)

    def dense_vectors(self, agent_id: int, ids: Sequence[str]) -> dict[str, np.ndarray]:
        request = self.qe.ScrollRequest(
            limit=len(ids),
            filter=to_edge_filter(agent_id, MemoryFilter(ids=list(ids))),
            with_payload=False,
            with_vector=[DENSE],
        )
        with self._lock:
            records, _ = self.shard.scroll(request)
        return {str(r.id): np.asarray(r.vector[DENSE], dtype=np.float32) for r in records}

    def scroll(
        self, agent_id: int, flt: MemoryFilter, limit: int, offset: str | None
    ) -> tuple[list[MemoryRecord], str | None]:
        request = self.qe.ScrollRequest(
            offset=uuid.UUID(offset) if offset else None,
            limit=limit,
            filter=to_edge_filter(agent_id, flt),
            with_payload=True,
            with_vector=False,
        )
        with self._lock:
            records, next_offset = self.shard.scroll(request)
        return [self.record_of(r.id, r.payload) for r in records], (str(next_offset) if next_offset else None)

    def point_origins(self, agent_id: int) -> dict[str, str | None]:
        origins: dict[str, str | None] = {}
        offset = None
        while True:
            request = self.qe.ScrollRequest(
                offset=offset,
                limit=1024,
                filter=to_edge_filter(agent_id, MemoryFilter()),
                with_payload=["origin"],
                with_vector=False,
            )
            with self._lock:
                records, offset = self.shard.scroll(request)
            origins.update((str(r.id), (r.payload or {}).get("origin")) for r in records)
            if offset is None:
                return origins

    def count(self, agent_id: int, flt: MemoryFilter) -> int:
        with self._lock:
            return int(self.shard.count(self.qe.CountRequest(exact=True, filter=to_edge_filter(agent_id, flt))))

    def set_payload(self, agent_id: int, memory_id: str, fields: dict[str, Any]) -> None:
        self.set_payloads(agent_id, [memory_id], fields)

    def set_payloads(self, agent_id: int, memory_ids: Sequence[str], fields: dict[str, Any]) -> None:
        payload = self.sealed_fields({k: to_epoch(v) if isinstance(v, datetime) else v for k, v in fields.items()})
        flt = to_edge_filter(agent_id, MemoryFilter(ids=list(memory_ids)))
        with self._lock:
            self.shard.update(self.qe.UpdateOperation.set_payload_by_filter(flt, payload))
            crash_point("edge.set_payload.unflushed")  # in the WAL: a crash of this process keeps it
            self._updated()

    def delete(self, agent_id: int, ids: Sequence[str]) -> None:
        flt = to_edge_filter(agent_id, MemoryFilter(ids=list(ids)))
        with self._lock:
            self.shard.update(self.qe.UpdateOperation.delete_points_by_filter(flt))
            crash_point("edge.delete.unflushed")  # in the WAL: a crash of this process keeps it
            self._updated()

    def delete_agents(self, keys: Sequence[str]) -> int:
        qe = self.qe
        flt = qe.Filter(must=[qe.FieldCondition(key="agent_id", match=qe.MatchAny(list(keys)))])
        with self._lock:
            if self.shard is None:
                raise StoreError(f"the archival store at {self.folder} is closed")
            found = int(self.shard.count(qe.CountRequest(exact=True, filter=flt)))
            if found:
                self.shard.update(qe.UpdateOperation.delete_points_by_filter(flt))
                self.shard.flush()
        return found

    def compact(self) -> None:
        """Rewrite the shard with its remaining points only. A deleted point stays in the WAL and in its segment's
        payload pages until a vacuum, which Edge's optimizer runs only past its thresholds (measured: 5 deleted of
        10 stay after `optimize` and `flush`): only a shard written anew holds none of its bytes. It costs a copy
        of every point and an optimization of the new shard, with the store held meanwhile."""
        with self._optimizing, self._lock:
            if self.shard is None:
                raise StoreError(f"the archival store at {self.folder} is closed")
            self._rewrite()

    def _rewrite(self) -> None:
        """Write every remaining point into a new shard beside this one, then swap it in (the caller holds both
        locks). A kill at any point leaves one whole shard for `recover_rewrite` to keep."""
        copied = write_fresh_shard(self.qe, self.shard, self.folder, self._config(), self._payloads_in_ram)
        self.shard.close()
        self.shard = None
        swap_in_fresh_shard(self.folder)
        self.shard = self._open()
        (self.folder / PID_FILE).write_text(str(os.getpid()))
        self._unindexed, self._since_flush = 0, 0
        log.info("archival_store_rewritten", backend=self.name, path=self.location, points=copied)

    def rekey(self, old_key: str, agent_id: int) -> None:
        from qdrant_edge import FieldCondition, Filter, IsEmptyCondition, MatchValue

        flt = Filter(
            must=[FieldCondition(key="agent_id", match=MatchValue(old_key)), IsEmptyCondition("payload_version")]
        )
        payload = {"agent_id": tenant_key(agent_id), "payload_version": PAYLOAD_VERSION}
        with self._lock:
            self.shard.update(self.qe.UpdateOperation.set_payload_by_filter(flt, payload))
            self.shard.flush()

    def close(self) -> None:
        with self._optimizing, self._lock:
            if self.shard is not None:
                self.shard.close()
                self.shard = None
                (self.folder / PID_FILE).unlink(missing_ok=True)
                log.info("archival_store_closed", backend=self.name, path=self.location)
