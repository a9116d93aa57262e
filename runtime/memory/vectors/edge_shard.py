"""A Qdrant Edge shard on disk: its configuration (from the `IndexPlan`), its payload indexes, and opening it.

A shard has one writer process (the WAL's lock): opening one another process holds raises `StoreLocked` naming
that process, from the PID file the holder writes into the shard's folder. The folder also remembers, in a file
of its own, that the shard keeps its payloads in RAM (`EdgeBackend`), so a later open starts that way.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pagemind.runtime.memory.vectors.index import IndexPlan
from pagemind.runtime.memory.vectors.records import DENSE, SPARSE, StoreError, StoreLocked

PID_FILE = "pagemind.pid"
# present once the shard keeps its payloads in RAM (`EdgeBackend._place_payloads`)
PAYLOADS_IN_RAM = "pagemind.payloads-in-ram"


def shard_config(qe: Any, dim: int, plan: IndexPlan, payloads_in_ram: bool) -> Any:
    """The shard's configuration (`qe`: the `qdrant_edge` module): vectors of `dim`, indexed as `plan` says,
    payloads in RAM or read from disk."""
    return qe.EdgeConfig(
        vectors={DENSE: qe.EdgeVectorParams(size=dim, distance=qe.Distance.Cosine)},
        sparse_vectors={SPARSE: qe.EdgeSparseVectorParams(modifier=qe.Modifier.Idf)},
        hnsw_config=qe.HnswIndexConfig(
            m=plan.m,
            ef_construct=plan.ef_construct,
            payload_m=plan.payload_m,
            full_scan_threshold=plan.full_scan_threshold_kb,
        ),
        quantization_config=qe.ScalarQuantizationConfig(
            type=qe.ScalarType.Int8, quantile=plan.quantile, always_ram=True
        ),
        optimizers=qe.EdgeOptimizersConfig(
            indexing_threshold=plan.indexing_threshold_kb,
            max_segment_size=plan.max_segment_size_kb,
            default_segment_number=plan.default_segment_number,
        ),
        # for segments built from now on (a shard made before keeps its older segments' storage until the
        # optimizer merges or rebuilds them)
        payload_memory=qe.Memory.Cached if payloads_in_ram else qe.Memory.Cold,
    )


def create_indexes(qe: Any, shard: Any) -> None:
    """The payload indexes every search and filter uses, created in `shard` (a no-op where they exist)."""
    # Only the tenant key gets HNSW links (`payload_m`): one graph per agent. The other indexes serve filters.
    shard.update(qe.UpdateOperation.create_field_index("agent_id", qe.KeywordIndexParams(is_tenant=True)))
    for key in ("user_id", "kind", "tags", "superseded_by"):
        shard.update(qe.UpdateOperation.create_field_index(key, qe.KeywordIndexParams(enable_hnsw=False)))
    for key in ("created_at", "updated_at", "last_hit_at", "expires_at"):
        shard.update(qe.UpdateOperation.create_field_index(key, qe.FloatIndexParams(enable_hnsw=False)))
    shard.flush()


def open_shard(qe: Any, folder: Path, config: Callable[[], Any]) -> Any:
    """The shard at `folder`, loaded, or created there when there is none, with its payload indexes; `config`
    gives its configuration (`shard_config`, or a backend's own). Raises `StoreLocked` when another process holds
    it, `StoreError` when it cannot be opened."""
    try:
        if (folder / "edge_config.json").exists():
            return qe.EdgeShard.load(str(folder), config())
        folder.mkdir(parents=True, exist_ok=True)
        shard = qe.EdgeShard.create(str(folder), config())
    except Exception as exc:
        if "WouldBlock" in str(exc):
            raise StoreLocked(
                f"the archival store at {folder} is in use by {_holder(folder)}. The embedded Qdrant "
                "store has one writer process: stop that process, or point every process at one Qdrant "
                "server (set QDRANT_URL, and QDRANT_API_KEY if it needs one)."
            ) from None
        raise StoreError(f"cannot open the archival store at {folder}: {exc}") from exc
    create_indexes(qe, shard)
    return shard


def _holder(folder: Path) -> str:
    pid_file = folder / PID_FILE
    try:
        pid = int(pid_file.read_text().strip())
    except (OSError, ValueError):
        return "another process"
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode().strip()
    except OSError:
        command = ""
    return f"process {pid}" + (f" ({command})" if command else "")
