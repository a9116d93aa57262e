"""The archival write order and its reconcile (issue 10, item 5), step by step on the server adapter.

Each test builds the state a crash would leave between two steps of a write (memory.ledger's order) by running
the steps before it by hand, then checks what is visible before any reconcile and what a reconcile makes of it.
The kills themselves, on the embedded store, are tests/crash/test_archival_crash.py.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from pagemind.runtime.memory.archival.ledger import new_token
from pagemind.runtime.memory.archival.memory import ArchivalService
from pagemind.runtime.memory.archival.reconcile import GRACE, reconcile
from pagemind.runtime.memory.vectors.records import MemoryRecord
from pagemind.runtime.memory.vectors.server import ServerBackend
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.records import utcnow
from pagemind.runtime.testing.clock import ManualClock
from pagemind.runtime.testing.embedder import FakeEmbedder
from tests.runtime.memory.archival.test_archival import ALICE, DIM, T0, at_cosine, run, unit

LYON = unit(1)
VECTORS = {
    "Lin lives in Lyon": LYON,
    "Lin lives in Paris": at_cosine(LYON, 0.9, 1),
    "Lin plays the cello": unit(0, 0, 1),
}


@pytest.fixture
def world(database_url):
    """A database and one server-adapter store; `service()` makes a fresh service of alice over them."""
    engine = make_engine(database_url)
    backend = ServerBackend.connect(":memory:", None, "pagemind_reconcile", DIM)

    def service(on=None) -> ArchivalService:
        return ArchivalService(
            ALICE,
            engine=engine,
            open_backend=lambda: on or backend,
            embedder=FakeEmbedder(VECTORS),
            clock=ManualClock(T0),
        )

    yield service, backend
    backend.close()


def record(text: str, kind: str = "fact", **fields) -> MemoryRecord:
    return MemoryRecord(agent_id=ALICE, text=text, kind=kind, created_at=T0, updated_at=T0, **fields)


def visible(service: ArchivalService, text: str) -> set[str]:
    return {h.id for h in run(service.search(text, count_hits=False))}


def half_insert(service: ArchivalService, rec: MemoryRecord, *, point: bool, supersedes: str | None = None) -> None:
    """Step 1 of an insert, and step 2 too when `point`: a crash right after."""
    service.ledger.begin_insert(rec, new_token(), supersedes, {"kind": rec.kind})
    if point:
        service.store.upsert(service.points([rec]))


def test_an_inserting_row_with_its_point_is_invisible_until_reconcile_completes_it(world):
    service, backend = world
    writer = service()
    half_insert(writer, rec := record("Lin plays the cello"), point=True)
    assert writer.list() == [] and visible(writer, "Lin plays the cello") == set()  # neither listed nor found
    assert writer.stats() == (0, ())
    done = reconcile(writer.ledger, writer.store, exclusive=False)
    assert (done.completed, done.rolled_back) == (1, 0)
    assert [m.id for m in writer.list()] == [rec.id] and visible(writer, "Lin plays the cello") == {rec.id}
    assert [v.operation for v in writer.history(rec.id)] == ["insert"] and writer.stats()[0] == 1


def test_an_inserting_row_without_its_point_waits_out_the_grace_on_a_shared_server_then_goes(world):
    service, _ = world
    writer = service()
    half_insert(writer, rec := record("Lin plays the cello"), point=False)
    fresh = reconcile(writer.ledger, writer.store, exclusive=False)
    assert (fresh.waiting, fresh.rolled_back) == (1, 0)  # another process may be about to upsert it
    assert writer.ledger.rows([rec.id])[0]["state"] == "inserting" and writer.list() == []
    later = reconcile(writer.ledger, writer.store, exclusive=False, now=utcnow() + GRACE + timedelta(seconds=1))
    assert later.rolled_back == 1 and writer.ledger.rows([rec.id]) == [] and writer.history(rec.id) == []


def test_with_one_writer_process_an_inserting_row_without_its_point_goes_at_once(world):
    service, _ = world
    writer = service()
    half_insert(writer, rec := record("Lin plays the cello"), point=False)
    assert reconcile(writer.ledger, writer.store, exclusive=True).rolled_back == 1
    assert writer.ledger.rows([rec.id]) == []


@pytest.mark.parametrize("marked_in_store", [False, True])
def test_a_supersede_cut_short_is_completed_on_both_sides(world, marked_in_store):
    service, _ = world
    writer = service()
    old = run(writer.insert("Lin lives in Lyon"))
    new = record("Lin lives in Paris")
    half_insert(writer, new, point=True, supersedes=old.id)
    if marked_in_store:  # step 3 done too
        writer.store.set_payload(old.id, {"superseded_by": new.id})
    assert [m.id for m in writer.list()] == [old.id]  # until completed, the old one stays what is listed...
    assert visible(writer, "Lin lives in Paris") <= {old.id}  # ...and nothing unlisted is found
    assert reconcile(writer.ledger, writer.store, exclusive=False).completed == 1
    assert [m.id for m in writer.list()] == [new.id]
    assert writer.store.get([old.id])[0].superseded_by == new.id
    assert [v.operation for v in writer.history(old.id)] == ["insert", "superseded"]
    assert visible(writer, "Lin lives in Lyon") == {new.id}


def test_a_refresh_cut_short_has_its_payload_set_again_from_sql(world):
    service, _ = world
    writer = service()
    first = run(writer.insert("Lin plays the cello", tags=["music"]))
    copy = record("Lin plays the cello", tags=["hobby"])
    fields = writer.ledger.begin_refresh(first.id, copy, new_token(), 1.0)  # step 1 only
    assert fields["tags"] == ["hobby", "music"] and writer.store.get([first.id])[0].tags == ["music"]
    assert reconcile(writer.ledger, writer.store, exclusive=False).resynced == 1
    stored = writer.store.get([first.id])[0]
    assert (stored.tags, stored.hit_count) == (["hobby", "music"], 1)
    assert writer.ledger.rows(unsettled=True) == []


def test_hit_counts_cut_short_are_set_again_from_sql(world):
    service, _ = world
    writer = service()
    first = run(writer.insert("Lin plays the cello"))
    writer.ledger.begin_hits([first.id], T0, new_token())
    reconcile(writer.ledger, writer.store, exclusive=False)
    assert writer.store.get([first.id])[0].hit_count == 1 == writer.list()[0].hit_count


def test_a_forget_cut_short_is_invisible_and_finished_by_reconcile(world):
    service, _ = world
    writer = service()
    kept, gone = run(writer.insert("Lin lives in Lyon")), run(writer.insert("Lin plays the cello"))
    assert writer.ledger.begin_forget(gone.id)  # step 1 only: the point is still there
    assert gone.id not in visible(writer, "Lin plays the cello") and [m.id for m in writer.list()] == [kept.id]
    assert writer.stats()[0] == 1 and writer.resolve_id(gone.id[:8]) is None
    done = reconcile(writer.ledger, writer.store, exclusive=False)
    assert done.forgotten == 1 and writer.store.ids() == {kept.id} and writer.ledger.rows([gone.id]) == []


def test_points_without_a_row_are_deleted_only_when_this_database_wrote_them(world):
    """A point with no row: written by this database (its origin), it goes; with no origin (an older pagemind) or
    another database's (a store shared by mistake), it stays, but search never shows it."""
    service, _ = world
    writer = service()
    ours, legacy, theirs = (record(t) for t in ("Lin lives in Lyon", "Lin lives in Paris", "Lin plays the cello"))
    [point] = writer.points([ours])
    writer.store.upsert([point])  # the store marks it with this database's origin
    backend = writer.store._backend
    for rec, origin in ((legacy, None), (theirs, "another-database")):
        [p] = writer.points([rec])
        backend.upsert(ALICE, [type(p)(p.record, p.dense, p.sparse, origin)])
    assert writer.store.origins()[ours.id] == writer.ledger.origin()
    assert writer.list() == [] and visible(writer, "Lin plays the cello") == set()
    done = reconcile(writer.ledger, writer.store, exclusive=True)
    assert (done.orphans, done.foreign) == (1, 2) and writer.store.ids() == {legacy.id, theirs.id}
    run(writer.insert("Lin drinks green tea"))  # a live memory, so search runs against the store
    assert visible(writer, "Lin plays the cello") | visible(writer, "Lin lives in Paris") <= {
        m.id for m in writer.list()
    }


def test_a_live_row_whose_point_is_missing_gets_it_back(world):
    """A crash under an older pagemind (point deleted, row kept) left a listed memory nothing could find."""
    service, _ = world
    writer = service()
    lost = run(writer.insert("Lin plays the cello"))
    writer.store.delete([lost.id])
    done = reconcile(writer.ledger, writer.store, exclusive=False, restore=writer.points)
    assert done.restored == 1 and visible(writer, "Lin plays the cello") == {lost.id}


def test_opening_the_store_reconciles_once_per_process_and_store(world):
    service, backend = world
    first = service()
    half_insert(first, rec := record("Lin plays the cello"), point=True)
    assert first.list() == []
    second = service()  # a second instance opening the same store handle: this process already reconciled
    assert second.store is not None and second.list() == []
    restarted = ServerBackend(backend.client, backend.collection, DIM, ":memory:")  # as a new process would open it
    third = service(on=restarted)
    assert third.store is not None and [m.id for m in third.list()] == [rec.id]
    assert visible(third, "Lin plays the cello") == {rec.id}


def test_the_write_path_never_takes_an_unsettled_point_for_a_neighbour(world):
    """A point whose row is still inserting (another writer's) is neither refreshed nor superseded."""
    service, _ = world
    writer = service()
    half_insert(writer, pending := record("Lin plays the cello", kind="preference"), point=True)
    writer.clock.advance(minutes=1)
    result = run(writer.insert("Lin plays the cello", kind="preference"))
    assert result.action == "inserted" and result.id != pending.id
    assert [m.id for m in writer.list()] == [result.id]


def test_a_failed_insert_tried_again_at_the_same_instant_replaces_its_own_leftover(world):
    service, _ = world
    writer = service()
    half_insert(writer, leftover := record("Lin plays the cello"), point=True)
    result = run(writer.insert("Lin plays the cello"))  # same text, same time: the same derived id
    assert (result.action, result.id) == ("inserted", leftover.id)
    assert [m.id for m in writer.list()] == [leftover.id] and len(writer.history(leftover.id)) == 1


def test_a_store_failure_mid_insert_takes_the_row_back(world, monkeypatch):
    service, _ = world
    writer = service()
    run(writer.insert("Lin lives in Lyon"))

    def broken(points):
        raise RuntimeError("store down")

    monkeypatch.setattr(writer.store, "upsert", broken)
    with pytest.raises(RuntimeError, match="store down"):
        run(writer.insert("Lin plays the cello"))
    assert [m.text for m in writer.list()] == ["Lin lives in Lyon"] and writer.ledger.rows(unsettled=True) == []
