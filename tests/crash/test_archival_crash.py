"""Archival memory and SQL agree after any crash (issue 10, item 5): SIGKILL at seeded points of the write path.

A child process runs a scenario (inserts, a supersede, a refresh, counted hits, a forget) against the embedded
Qdrant store (the one that survives a kill: qdrant-client's local mode cannot) and a database, writing a line for
every write the service acknowledged, and kills itself with SIGKILL at the point named by PAGEMIND_KILL_AT
(`runtime.process.crashpoints`; `NAME@N`: the N-th time). Some runs then start a second child that is killed inside the
reconcile that opening the store runs. The test process then opens the store as the next process would and checks:

- SQL and the store agree one for one (every point has a settled row, every row a point; superseded and payload
  fields alike), and nothing is left unsettled;
- search results ⊆ listed memories, for every text of the scenario;
- every acknowledged memory is listed and found by its text (unless an acknowledged supersede or forget took it);
- forget works on everything listed, after which the store and SQL hold nothing of the agent.

Children are forked from a forkserver that has imported the third-party libraries once (a kill costs a fork and
pagemind's own imports, not an interpreter); tests/support/archival_crash_child.py is the child.
"""

from __future__ import annotations

import asyncio
import multiprocessing
import signal
from pathlib import Path

import pytest

from pagemind.runtime.memory.archival.memory import ArchivalService
from pagemind.runtime.memory.vectors.edge import EdgeBackend
from pagemind.runtime.memory.vectors.records import MemoryFilter
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.testing.clock import ManualClock
from pagemind.runtime.testing.embedder import FakeEmbedder
from tests.runtime.memory.archival.test_archival import ALICE, DIM, T0, at_cosine, unit
from tests.support.archival_crash_child import HEAVY, child

LYON = unit(1)
VECTORS = {
    "Lin lives in Lyon": LYON,
    "Lin lives in Paris": at_cosine(LYON, 0.9, 1),
    "Lin plays the cello": unit(0, 0, 1),
    "Lin drinks green tea": unit(0, 0, 0, 1),
    "Lin adopted a cat named Miso": unit(0, 0, 0, 0, 1),
}

# Every write of the scenario, in order: the insert points count _add calls (1 Lyon, 2 cello, 3 tea, 4 Paris,
# which supersedes Lyon, 5 Miso); the store's set_payload calls are 1 the supersede mark, 2 the refresh.
POINTS = [
    "archival.insert.in_transaction@1",
    "archival.insert.pending@1",
    "edge.upsert.unflushed@1",
    "archival.insert.upserted@1",
    "archival.complete.in_transaction@1",
    "archival.insert.completed@1",
    "archival.insert.in_transaction@4",
    "archival.insert.pending@4",
    "edge.upsert.unflushed@4",
    "archival.insert.upserted@4",
    "edge.set_payload.unflushed@1",
    "archival.insert.superseded@1",
    "archival.complete.in_transaction@4",
    "archival.insert.completed@4",
    "archival.refresh.pending@1",
    "edge.set_payload.unflushed@2",
    "archival.refresh.payload@1",
    "archival.refresh.completed@1",
    "archival.hits.pending@1",
    "archival.hits.payload@1",
    "archival.forget.pending@1",
    "edge.delete.unflushed@1",
    "archival.forget.point_deleted@1",
    "archival.forget.completed@1",
]
# (the write the first child dies in, the reconcile step the second child dies in)
IN_RECONCILE = [
    ("archival.insert.upserted@4", "archival.reconcile.completed@1"),
    ("archival.insert.pending@2", "archival.reconcile.rolled_back@1"),
    ("archival.refresh.pending@1", "archival.reconcile.resynced@1"),
    ("archival.forget.pending@1", "archival.reconcile.forgotten@1"),
    ("archival.insert.upserted@4", "edge.set_payload.unflushed@1"),  # the supersede mark, made by the reconcile
]


# A second embedding model: every text somewhere else (axes no VECTORS uses), so a vector of one model scores ~0
# against the other's.
NEW_VECTORS = {text: unit(*([0] * (20 + n) + [1])) for n, text in enumerate(VECTORS)}


def make_service(backend: EdgeBackend, database_url: str, new_model: bool = False) -> ArchivalService:
    embedder = FakeEmbedder(NEW_VECTORS, model_id="fake-new") if new_model else FakeEmbedder(VECTORS)
    return ArchivalService(
        ALICE, engine=make_engine(database_url), open_backend=lambda: backend, embedder=embedder, clock=ManualClock(T0)
    )


async def scenario(service: ArchivalService, ack) -> None:
    lyon = await service.insert("Lin lives in Lyon")
    ack("insert", lyon.id)
    ack("insert", (await service.insert("Lin plays the cello", kind="preference", tags=["music"])).id)
    tea = await service.insert("Lin drinks green tea", kind="preference")
    ack("insert", tea.id)
    service.clock.advance(minutes=1)
    paris = await service.insert("Lin lives in Paris")
    assert paris.action == "superseded"
    ack("insert", paris.id)
    again = await service.insert("Lin plays the cello", kind="preference", tags=["hobby"])
    assert again.action == "duplicate"
    ack("refresh", again.id)
    assert await service.search("Lin plays the cello")
    ack("forgetting", tea.id)  # asked, not yet answered: either outcome is allowed
    await service.forget(tea.id)
    ack("forget", tea.id)
    ack("insert", (await service.insert("Lin adopted a cat named Miso", kind="episode")).id)


@pytest.fixture(scope="module")
def forkserver():
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(HEAVY)
    return context


def _die_at(forkserver, home: Path, database_url: str, point: str, mode: str = "scenario") -> None:
    process = forkserver.Process(target=child, args=(str(home), database_url, point, mode))
    process.start()
    process.join(timeout=120)
    assert process.exitcode == -signal.SIGKILL, f"{point}: exit code {process.exitcode} (the point was never reached?)"


def _acks(home: Path) -> list[tuple[str, str]]:
    log = home / "acks.log"
    return [tuple(line.split()) for line in log.read_text().splitlines()] if log.exists() else []


def _found(service: ArchivalService, text: str) -> set[str]:
    return {h.id for h in asyncio.run(service.search(text, count_hits=False))}


def _check(home: Path, database_url: str) -> None:
    backend = EdgeBackend(home / "shard", DIM)  # the next process: WAL replayed, lock free
    try:
        service = make_service(backend, database_url)
        points = {r.id: r for r in service.store.all()}  # opening the store reconciles first
        rows = {m.id: m for m in service.list(include_superseded=True)}
        listed = {m.id for m in service.list()}
        assert set(points) == set(rows) and service.ledger.rows(unsettled=True) == []
        for memory_id, row in rows.items():
            point = points[memory_id]
            assert (point.superseded_by, point.tags, point.hit_count) == (row.superseded_by, row.tags, row.hit_count)
        for text in VECTORS:
            assert _found(service, text) <= listed, text
        acks = _acks(home)
        forgotten = {i for kind, i in acks if kind == "forget"}
        asked = {i for kind, i in acks if kind == "forgetting"}
        for kind, memory_id in acks:
            if memory_id in forgotten:
                assert memory_id not in rows and memory_id not in points
            elif memory_id in asked and memory_id not in rows:
                assert memory_id not in points  # the forget went through before the kill
            elif rows[memory_id].superseded_by:
                assert rows[memory_id].superseded_by in listed  # replaced by a memory that is there to find
            else:
                assert memory_id in _found(service, rows[memory_id].text)
            if kind == "refresh":
                assert "hobby" in rows[memory_id].tags and rows[memory_id].hit_count >= 1
        for memory_id in rows:
            assert asyncio.run(service.forget(memory_id))
        assert service.store.ids() == set() and service.list(include_superseded=True) == []
        assert service.stats() == (0, ())
    finally:
        backend.close()


@pytest.mark.parametrize("point", POINTS)
def test_a_kill_inside_the_write_path(forkserver, tmp_path, database_url, point):
    make_engine(database_url).dispose()  # migrated once here, not in every child
    _die_at(forkserver, tmp_path, database_url, point)
    _check(tmp_path, database_url)


@pytest.mark.parametrize("write, step", IN_RECONCILE)
def test_a_kill_inside_the_reconcile_after_a_kill_inside_a_write(forkserver, tmp_path, database_url, write, step):
    make_engine(database_url).dispose()
    _die_at(forkserver, tmp_path, database_url, write)
    _die_at(forkserver, tmp_path, database_url, step, mode="open")
    _check(tmp_path, database_url)


@pytest.mark.parametrize("step", ["archival.reembed.batch@2", "edge.upsert.unflushed@3"])
def test_a_kill_inside_a_reembed_resumes_into_the_new_models_store_only(forkserver, tmp_path, database_url, step):
    """The embedding model changed: opening its (new, empty) store re-embeds every memory from SQL, one memory
    per batch here; killed part-way, the next open embeds only what is still missing, and every point in the new
    store holds the new model's vector. The old store is untouched."""
    old = EdgeBackend(tmp_path / "shard", DIM)
    asyncio.run(scenario(make_service(old, database_url), lambda kind, memory_id: None))
    old.close()
    _die_at(forkserver, tmp_path, database_url, step, mode="switch")
    backend = EdgeBackend(tmp_path / "shard-new", DIM)
    try:
        service = make_service(backend, database_url, new_model=True)
        rows = {m.id: m for m in service.list(include_superseded=True)}
        points = {r.id: r for r in service.store.all()}
        assert set(points) == set(rows) and len(rows) == 4
        assert len(service.embedder.texts) < len(rows)  # only what the killed open left missing was embedded
        for memory_id, row in rows.items():
            [hit] = service.store.search_dense(NEW_VECTORS[row.text], MemoryFilter(), 1, exact=True)
            assert hit.record.id == memory_id and abs(hit.score - 1.0) < 1e-5
            assert points[memory_id].superseded_by == row.superseded_by
    finally:
        backend.close()
    old = EdgeBackend(tmp_path / "shard", DIM)
    try:
        assert make_service(old, database_url).store.ids() == set(rows)
    finally:
        old.close()


def test_every_seeded_point_is_in_the_code():
    """A renamed point would make its test die elsewhere or not at all: each name appears in the write path."""
    root = Path(__file__).parents[2] / "runtime" / "memory"
    source = "".join(p.read_text() for p in root.rglob("*.py"))
    names = {p.split("@")[0] for p in POINTS} | {s.split("@")[0] for _, s in IN_RECONCILE} | {"archival.reembed.batch"}
    assert all(f'crash_point("{name}")' in source for name in names)
    assert len(POINTS) + len(IN_RECONCILE) >= 20
