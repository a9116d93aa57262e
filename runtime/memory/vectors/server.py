"""The archival store on a Qdrant server or cluster, through `qdrant-client` (`QDRANT_URL`, `QDRANT_API_KEY`).

One collection per embedding model and dimension, every agent in it (tenant index on `agent_id`), indexed as the
embedded store is (`memory.index`: a graph per agent, int8 copies rescored with the originals; the server's own
optimizer indexes in the background). Tests drive it with qdrant-client's in-memory local mode, which ignores
indexes and search parameters (it compares every point).
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Sequence
from datetime import datetime
from typing import Any
from urllib.parse import urlsplit

import numpy as np
import structlog

from pagemind.runtime.memory.vectors.backend import ArchivalBackend
from pagemind.runtime.memory.vectors.index import PLAN, IndexPlan
from pagemind.runtime.memory.vectors.records import (
    DENSE,
    PAYLOAD_VERSION,
    PINNED,
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

log = structlog.get_logger("pagemind.archival_store")


def _client_filter(agent_id: int, flt: MemoryFilter) -> Any:
    from qdrant_client import models as m

    must: list[Any] = [m.FieldCondition(key="agent_id", match=m.MatchValue(value=tenant_key(agent_id)))]
    must_not: list[Any] = []
    if flt.ids is not None:
        must.append(m.HasIdCondition(has_id=list(flt.ids)))
    if flt.user_id is not None:
        must.append(m.FieldCondition(key="user_id", match=m.MatchValue(value=flt.user_id)))
    if flt.kinds:
        must.append(m.FieldCondition(key="kind", match=m.MatchAny(any=list(flt.kinds))))
    if flt.tags:
        must.append(m.FieldCondition(key="tags", match=m.MatchAny(any=list(flt.tags))))
    if flt.created_from or flt.created_to:
        must.append(
            m.FieldCondition(
                key="created_at", range=m.Range(gte=to_epoch(flt.created_from), lte=to_epoch(flt.created_to))
            )
        )
    if flt.live_at is not None:
        must.append(m.IsEmptyCondition(is_empty=m.PayloadField(key="superseded_by")))
        must_not.append(m.FieldCondition(key="expires_at", range=m.Range(lte=to_epoch(flt.live_at))))
    if flt.unsuperseded:
        must.append(m.IsEmptyCondition(is_empty=m.PayloadField(key="superseded_by")))
    if flt.used_since is not None:  # last use: the later of the last hit and the last write (`last_used`)
        since = to_epoch(flt.used_since)
        must.append(
            m.Filter(
                should=[
                    m.FieldCondition(key="last_hit_at", range=m.Range(gte=since)),
                    m.FieldCondition(key="updated_at", range=m.Range(gte=since)),
                    m.FieldCondition(key="tags", match=m.MatchAny(any=[PINNED])),  # pinned: never dormant
                ]
            )
        )
    return m.Filter(must=must, must_not=must_not or None)


def _without_userinfo(url: str) -> str:
    return re.sub(r"(?<=://)[^/\s@]+@", "", url)


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:300] if text else "no message"


def _check_url(url: str) -> None:
    """Raise StoreError, in one line, for a QDRANT_URL that is no http(s) URL with a host (and a valid port)."""
    problem = ""
    try:
        parts = urlsplit(url)
        _ = parts.port  # raises for a port that is not a number
    except ValueError as exc:
        problem = str(exc)
    else:
        if parts.scheme not in ("http", "https") or not parts.hostname:
            problem = "it needs http:// or https:// and a host"
    if problem:
        raise StoreError(
            f"QDRANT_URL={_without_userinfo(url)!r} is not a Qdrant server URL ({problem}); "
            "e.g. http://localhost:6333, or unset it for the embedded store"
        )


def _check_version(client: Any, url: str) -> None:
    """Ask the server its version (which also proves it answers) and warn, as qdrant-client would, when client and
    server differ by a major version or by more than one minor version."""
    from importlib.metadata import version

    from qdrant_client.common.version_check import is_compatible

    server = client.info().version
    ours = version("qdrant-client")
    if not is_compatible(ours, server):
        log.warning("qdrant_version_mismatch", client=ours, server=server, location=_without_userinfo(url))


class ServerBackend(ArchivalBackend):
    """A Qdrant server or cluster through `qdrant-client`: one collection per embedding model and dimension."""

    name = "qdrant-server"

    def __init__(
        self, client: Any, collection: str, dim: int, location: str, plan: IndexPlan = PLAN, *, local: bool = False
    ):
        from qdrant_client import models as m

        self.client = client
        self.collection = collection
        self.dim = dim
        self.plan = plan
        self.location = f"{location} (collection {collection})"
        # local mode (tests) compares every point anyway, and warns about search parameters on every query
        local = self.local = local or location == ":memory:"
        self._params = self._search_params(plan.hnsw_ef)
        self._exact = None if local else m.SearchParams(exact=True)
        self._ensure_collection()
        log.info("archival_store_open", backend=self.name, location=self.location, dim=dim)

    @classmethod
    def connect(cls, url: str, api_key: str | None, collection: str, dim: int) -> ServerBackend:
        """Connect to the server at `url` (":memory:" gives qdrant-client's local test double)."""
        from qdrant_client import QdrantClient

        local = url == ":memory:"
        if not local:
            _check_url(url)
        try:
            if local:
                client = QdrantClient(location=":memory:")
            else:
                # The client's own version check runs on a daemon thread that may still be opening its TLS context
                # when a short command exits: OpenSSL then crashes the process (exit 139 after a clear error).
                client = QdrantClient(url=url, api_key=api_key, check_compatibility=False)
                _check_version(client, url)
            return cls(client, collection, dim, url, local=local)
        except Exception as exc:  # refused, unreachable, not Qdrant, a bad key: whatever qdrant-client raises
            raise StoreError(
                f"cannot use the Qdrant server at QDRANT_URL={_without_userinfo(url)!r}: {type(exc).__name__}: "
                f"{_first_line(exc)} (check that it runs and answers there, and QDRANT_API_KEY)"
            ) from None

    def _ensure_collection(self) -> None:
        if self.client.collection_exists(self.collection):
            if not self.local:  # local mode keeps no index config to compare
                self._upgrade()
            return
        self.client.create_collection(self.collection, **self.collection_config())
        with warnings.catch_warnings():  # local mode (tests) ignores indexes, and says so
            warnings.simplefilter("ignore")
            self._create_indexes()

    def collection_config(self) -> dict[str, Any]:
        """The collection's vectors and index (`memory.index`), as `create_collection` takes them."""
        from qdrant_client import models as m

        plan = self.plan
        return {
            "vectors_config": {DENSE: m.VectorParams(size=self.dim, distance=m.Distance.COSINE)},
            "sparse_vectors_config": {SPARSE: m.SparseVectorParams(modifier=m.Modifier.IDF)},
            "on_disk_payload": not plan.payload_in_ram,
            "hnsw_config": m.HnswConfigDiff(
                m=plan.m,
                payload_m=plan.payload_m,
                ef_construct=plan.ef_construct,
                full_scan_threshold=plan.full_scan_threshold_kb,
            ),
            "quantization_config": m.ScalarQuantization(
                scalar=m.ScalarQuantizationConfig(type=m.ScalarType.INT8, quantile=plan.quantile, always_ram=True)
            ),
            "optimizers_config": m.OptimizersConfigDiff(
                indexing_threshold=plan.indexing_threshold_kb,
                max_segment_size=plan.max_segment_size_kb,
                default_segment_number=plan.default_segment_number,
            ),
        }

    def payload_indexes(self) -> dict[str, Any]:
        """Every payload index: the tenant key (the only one with HNSW links: a graph per agent) and the filters'."""
        from qdrant_client import models as m

        keyword, number = m.KeywordIndexType.KEYWORD, m.FloatIndexType.FLOAT
        return (
            {"agent_id": m.KeywordIndexParams(type=keyword, is_tenant=True)}
            | {
                key: m.KeywordIndexParams(type=keyword, enable_hnsw=False)
                for key in ("user_id", "kind", "tags", "superseded_by")
            }
            | {
                key: m.FloatIndexParams(type=number, enable_hnsw=False)
                for key in ("created_at", "updated_at", "last_hit_at", "expires_at")
            }
        )

    def _upgrade(self) -> None:
        """A collection made before the per-agent index (`memory.index`) gets it: the server rebuilds in the
        background, and searches meanwhile stay correct (exact where not yet indexed)."""
        config = self.client.get_collection(self.collection).config
        hnsw = config.hnsw_config
        if (hnsw.m, hnsw.payload_m) == (self.plan.m, self.plan.payload_m) and config.quantization_config is not None:
            return
        wanted = self.collection_config()
        self.client.update_collection(
            self.collection,
            hnsw_config=wanted["hnsw_config"],
            quantization_config=wanted["quantization_config"],
            optimizers_config=wanted["optimizers_config"],
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            self._create_indexes()
        log.info("archival_store_upgraded", backend=self.name, location=self.location)

    def _create_indexes(self) -> None:
        for key, params in self.payload_indexes().items():
            self.client.create_payload_index(self.collection, key, params)

    def upsert(self, agent_id: int, points: Sequence[StoredPoint]) -> None:
        self.upsert_all({agent_id: list(points)})

    def upsert_all(self, points: dict[int, list[StoredPoint]]) -> None:
        from qdrant_client import models as m

        if any(p.record.agent_id != agent_id for agent_id, some in points.items() for p in some):
            raise StoreError("refusing to write another agent's memory")
        structs = []
        for p in (p for some in points.values() for p in some):
            vector: dict[str, Any] = {DENSE: np.asarray(p.dense, dtype=np.float32).tolist()}
            if p.sparse.indices:
                vector[SPARSE] = m.SparseVector(indices=p.sparse.indices, values=p.sparse.values)
            structs.append(m.PointStruct(id=p.record.id, vector=vector, payload=self.sealed_payload(p)))
        self.client.upsert(self.collection, structs, wait=True)

    def _query(
        self, agent_id: int, query: Any, using: str, flt: MemoryFilter, limit: int, params: Any = None
    ) -> list[Hit]:
        response = self.client.query_points(
            self.collection,
            query=query,
            using=using,
            limit=limit,
            query_filter=_client_filter(agent_id, flt),
            with_payload=True,
            search_params=params,
        )
        return [Hit(self.record_of(p.id, p.payload), float(p.score)) for p in response.points]

    def _search_params(self, ef: int) -> Any:
        """A graph walk of `ef` candidates on the int8 copies, rescored with the originals (None in local mode)."""
        from qdrant_client import models as m

        if self.local:
            return None
        return m.SearchParams(
            hnsw_ef=ef, quantization=m.QuantizationSearchParams(rescore=True, oversampling=self.plan.oversampling)
        )

    def search_dense(
        self,
        agent_id: int,
        vector: np.ndarray,
        flt: MemoryFilter,
        limit: int,
        exact: bool = False,
        ef: int | None = None,
    ) -> list[Hit]:
        params = self._exact if exact else self._params if ef is None else self._search_params(ef)
        return self._query(agent_id, np.asarray(vector, dtype=np.float32).tolist(), DENSE, flt, limit, params)

    def search_sparse(self, agent_id: int, vector: Sparse, flt: MemoryFilter, limit: int) -> list[Hit]:
        from qdrant_client import models as m

        return self._query(agent_id, m.SparseVector(indices=vector.indices, values=vector.values), SPARSE, flt, limit)

    def dense_vectors(self, agent_id: int, ids: Sequence[str]) -> dict[str, np.ndarray]:
        records, _ = self.client.scroll(
            self.collection,
            scroll_filter=_client_filter(agent_id, MemoryFilter(ids=list(ids))),
            limit=len(ids),
            with_payload=False,
            with_vectors=[DENSE],
        )
        return {str(r.id): np.asarray(r.vector[DENSE], dtype=np.float32) for r in records}

    def scroll(
        self, agent_id: int, flt: MemoryFilter, limit: int, offset: str | None
    ) -> tuple[list[MemoryRecord], str | None]:
        records, next_offset = self.client.scroll(
            self.collection,
            scroll_filter=_client_filter(agent_id, flt),
            limit=limit,
            offset=offset,
            with_payload=True,
            with_vectors=False,
        )
        return [self.record_of(r.id, r.payload) for r in records], (str(next_offset) if next_offset else None)

    def point_origins(self, agent_id: int) -> dict[str, str | None]:
        origins: dict[str, str | None] = {}
        offset = None
        while True:
            records, offset = self.client.scroll(
                self.collection,
                scroll_filter=_client_filter(agent_id, MemoryFilter()),
                limit=1024,
                offset=offset,
                with_payload=["origin"],
                with_vectors=False,
            )
            origins.update((str(r.id), (r.payload or {}).get("origin")) for r in records)
            if offset is None:
                return origins

    def count(self, agent_id: int, flt: MemoryFilter) -> int:
        return int(self.client.count(self.collection, count_filter=_client_filter(agent_id, flt), exact=True).count)

    def set_payload(self, agent_id: int, memory_id: str, fields: dict[str, Any]) -> None:
        self.set_payloads(agent_id, [memory_id], fields)

    def set_payloads(self, agent_id: int, memory_ids: Sequence[str], fields: dict[str, Any]) -> None:
        payload = self.sealed_fields({k: to_epoch(v) if isinstance(v, datetime) else v for k, v in fields.items()})
        self.client.set_payload(
            self.collection,
            payload=payload,
            points=_client_filter(agent_id, MemoryFilter(ids=list(memory_ids))),
            wait=True,
        )

    def delete(self, agent_id: int, ids: Sequence[str]) -> None:
        from qdrant_client import models as m

        selector = m.FilterSelector(filter=_client_filter(agent_id, MemoryFilter(ids=list(ids))))
        self.client.delete(self.collection, points_selector=selector, wait=True)

    def rekey(self, old_key: str, agent_id: int) -> None:
        from qdrant_client import models as m

        flt = m.Filter(
            must=[
                m.FieldCondition(key="agent_id", match=m.MatchValue(value=old_key)),
                m.IsEmptyCondition(is_empty=m.PayloadField(key="payload_version")),
            ]
        )
        self.client.set_payload(
            self.collection,
            payload={"agent_id": tenant_key(agent_id), "payload_version": PAYLOAD_VERSION},
            points=flt,
            wait=True,
        )

    def delete_agents(self, keys: Sequence[str]) -> int:
        return erase_in_collection(self.client, self.collection, keys)

    def compact(self) -> None:
        """Nothing: a server drops deleted points from its segments and WAL in its own time (its optimizer; the
        docs' operations page say how to make it run)."""

    def close(self) -> None:
        self.client.close()


def erase_in_collection(client: Any, collection: str, keys: Sequence[str]) -> int:
    """Delete every point of the agents `keys` from one collection (waiting for the server); how many there were."""
    from qdrant_client import models as m

    flt = m.Filter(must=[m.FieldCondition(key="agent_id", match=m.MatchAny(any=list(keys)))])
    found = int(client.count(collection, count_filter=flt, exact=True).count)
    if found:
        client.delete(collection, points_selector=m.FilterSelector(filter=flt), wait=True)
    return found
