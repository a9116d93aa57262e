"""Rewriting a Qdrant Edge shard, and finishing or undoing a rewrite a kill cut short.

Only a shard written anew holds none of a deleted point's bytes (`EdgeBackend.compact`, which an erasure runs
through `vectors.stores.erase_agents`): every remaining point is copied into a new shard built beside the old one
(its folder's name + FRESH), then the old one is moved aside (+ RETIRED) and the new one into its place. A kill at
any point leaves one whole shard, which `recover_rewrite` keeps when the folder is next opened.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

from pagemind.runtime.memory.vectors.backend import UPSERT_BATCH
from pagemind.runtime.memory.vectors.edge_shard import PAYLOADS_IN_RAM, create_indexes
from pagemind.runtime.process.crashpoints import crash_point

FRESH, RETIRED = ".rewrite-new", ".rewrite-old"


def recover_rewrite(folder: Path) -> None:
    """Finish or undo a rewrite of the shard at `folder` that a kill cut short (`EdgeBackend.compact`): a
    finished new shard whose old one was already moved aside takes its place; an unfinished one is dropped (the old
    shard is still in place, and the erasure that wanted it rewrites it again); the old one goes."""
    fresh, retired = folder.with_name(folder.name + FRESH), folder.with_name(folder.name + RETIRED)
    if fresh.exists() and not folder.exists():
        os.replace(fresh, folder)
    shutil.rmtree(fresh, ignore_errors=True)
    shutil.rmtree(retired, ignore_errors=True)


def write_fresh_shard(qe: Any, shard: Any, folder: Path, config: Any, payloads_in_ram: bool) -> int:
    """Copy every point of `shard` (the one at `folder`) into a new shard beside it (+ FRESH) of configuration
    `config`, optimized and closed, marked as keeping its payloads in RAM if the old one does; how many points it
    copied. The caller keeps `shard` from changing."""
    fresh = folder.with_name(folder.name + FRESH)
    shutil.rmtree(fresh, ignore_errors=True)
    target = qe.EdgeShard.create(str(fresh), config)
    create_indexes(qe, target)
    offset, copied = None, 0
    while True:
        request = qe.ScrollRequest(offset=offset, limit=UPSERT_BATCH, with_payload=True, with_vector=True)
        records, offset = shard.scroll(request)
        if records:
            target.update(qe.UpdateOperation.upsert_points([qe.Point(r.id, r.vector, r.payload) for r in records]))
            copied += len(records)
        if offset is None:
            break
    target.optimize()
    target.close()  # flushes
    if payloads_in_ram:
        (fresh / PAYLOADS_IN_RAM).touch()
    return copied


def swap_in_fresh_shard(folder: Path) -> None:
    """Put the new shard `write_fresh_shard` built in the place of the one at `folder` (closed by the caller):
    the old one moved aside, the new one moved in, the old one deleted."""
    fresh = folder.with_name(folder.name + FRESH)
    retired = folder.with_name(folder.name + RETIRED)
    shutil.rmtree(retired, ignore_errors=True)
    os.replace(folder, retired)
    crash_point("edge.rewrite.swapping")
    os.replace(fresh, folder)
    shutil.rmtree(retired)
