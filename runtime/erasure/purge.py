"""Purging agents: every store, in an order a kill can interrupt anywhere.

    reports = purge_agents(engine, settings, [(agent_id, name), ...])   # one agent, or every agent of a user

1. `record.record`: the purges are recorded and the agents hidden, in one transaction (from here on no listing,
   name lookup, route or daemon sees them, and the next process that opens the stores finishes the purge);
2. their trace folders (`$PAGEMIND_HOME/traces/NAME/`) are deleted;
3. their points are deleted from every vector store and each embedded shard is rewritten without them
   (`vectors.stores.erase_agents`);
4. their rows, one transaction per agent (`rows.erase_rows`), the record's step set to `erased` in it;
5. SQLite's WAL is checkpointed and truncated (`rows.compact`), then the records go.

Each step is idempotent, so a purge resumed after a kill (`resume_purges`, at the next open) does it all again
where it is not done; what it reports adds up every attempt's counts.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import structlog
from sqlalchemy import select
from sqlalchemy.engine import Connection, Engine

from pagemind.runtime.erasure import record as purges
from pagemind.runtime.erasure.record import ERASED, RECORDED, Pending, summary
from pagemind.runtime.erasure.rows import compact, erase_rows
from pagemind.runtime.memory.vectors.records import tenant_key
from pagemind.runtime.memory.vectors.stores import check_stores, erase_agents
from pagemind.runtime.process.crashpoints import crash_point
from pagemind.runtime.process.settings import Settings
from pagemind.runtime.state.records import utcnow
from pagemind.runtime.state.tables.archival import archival_rekeys

log = structlog.get_logger("pagemind.erasure")


@dataclass(frozen=True)
class PurgeReport:
    """What a purge erased, per store: `sql` (rows per table, the full-text index and the embedding cache
    included), `vectors` (points), `traces` (files); `resumed`: it was finished after a kill (its counts then
    leave out what the killed attempt erased after its last stored step: a floor, not a tally)."""

    agent_id: int
    name: str
    counts: dict[str, dict[str, int]]
    resumed: bool

    def summary(self) -> str:
        """One line: the totals per store."""
        return summary(self.counts)


def purge_agents(engine: Engine, settings: Settings, agents: Sequence[tuple[int, str]]) -> list[PurgeReport]:
    """Erase `agents` (id, name) from every store: recorded (and hidden) first, then erased, then compacted.
    Callers hold off the agents' turns while the record is written. Agents already being purged are finished."""
    record_purges(engine, settings, agents)
    return finish(engine, settings, [agent_id for agent_id, _ in agents])


def record_purges(engine: Engine, settings: Settings, agents: Sequence[tuple[int, str]]) -> None:
    """Check that every vector store answers (nothing is recorded otherwise: `StoreError`), then record the purges
    and hide the agents in one transaction. `finish` does the rest."""
    if not agents:
        return
    check_stores(settings.home, settings.qdrant_url, settings.qdrant_api_key)
    with engine.begin() as conn:
        purges.record(conn, agents, utcnow())
    crash_point("purge.recorded")
    log.info("purge_recorded", agents=[agent_id for agent_id, _ in agents])


def resume_purges(engine: Engine, settings: Settings) -> list[PurgeReport]:
    """Finish every purge a kill cut short (at an open; one read when there is none)."""
    if not purges.any_pending(engine):
        return []
    reports = finish(engine, settings, None)
    for report in reports:
        log.warning("purge_resumed", agent_id=report.agent_id, counts=report.counts)
    return reports


def finish(engine: Engine, settings: Settings, ids: Sequence[int] | None) -> list[PurgeReport]:
    """Run the recorded purges of `ids` (None: all) to their end."""
    items = purges.pending(engine, ids)
    if not items:
        return []
    purges.started(engine, [item.agent_id for item in items])
    todo = [item for item in items if item.step == RECORDED]
    if todo:
        _erase_files(engine, settings, todo)
        for item in todo:
            erase_rows(engine, item.agent_id, _progress(item))
            crash_point("purge.rows_erased")
    if not compact(engine):
        return _reports(items)  # recorded still, rows gone: the next open compacts again
    crash_point("purge.compacted")
    with engine.begin() as conn:
        purges.forget(conn, [item.agent_id for item in items])
    for item in items:
        log.info("purge_done", agent_id=item.agent_id, counts=item.counts)
    return _reports(items)


def _reports(items: list[Pending]) -> list[PurgeReport]:
    return [PurgeReport(item.agent_id, item.name, item.counts, item.attempts > 0) for item in items]


def _progress(item: Pending) -> Callable[[Connection, dict[str, int]], None]:
    """What the rows' transaction stores last: the step `erased`, with the rows it deleted."""
    return lambda conn, counts: purges.progress(conn, item, ERASED, {"sql": counts})


def _erase_files(engine: Engine, settings: Settings, items: list[Pending]) -> None:
    """The traces and the vector-store points of the agents (rows still there), each step's counts stored."""
    traces = {item.agent_id: _delete_traces(settings.home, item.name) for item in items}
    crash_point("purge.traces_deleted")
    keys = _vector_keys(engine, items)
    resumed = any(item.attempts > 0 for item in items)
    points = erase_agents(settings.home, keys, settings.qdrant_url, settings.qdrant_api_key, rewrite=resumed)
    crash_point("purge.vectors_erased")
    with engine.begin() as conn:
        for item in items:
            counts = {"traces": {"files": traces[item.agent_id]}, "vectors": {"points": points[item.agent_id]}}
            purges.progress(conn, item, RECORDED, counts)


def _vector_keys(engine: Engine, items: list[Pending]) -> dict[int, list[str]]:
    """Each agent's tenant key and the names its points carried before they were keyed by id (migration 0002)."""
    keys = {item.agent_id: [tenant_key(item.agent_id)] for item in items}
    with engine.connect() as conn:
        query = select(archival_rekeys.c.agent_id, archival_rekeys.c.old_key)
        for agent_id, old_key in conn.execute(query.where(archival_rekeys.c.agent_id.in_(list(keys)))):
            keys[agent_id].append(old_key)
    return keys


def _delete_traces(home: Path, name: str) -> int:
    """Delete the agent's trace folder; how many files it held. A name that would leave the traces folder (none
    can: agent names are plain) deletes nothing."""
    root = (home / "traces").resolve()
    folder = (root / name).resolve()
    if folder.parent != root or not folder.is_dir():
        return 0
    files = sum(1 for p in folder.rglob("*") if p.is_file())
    shutil.rmtree(folder)
    return files
