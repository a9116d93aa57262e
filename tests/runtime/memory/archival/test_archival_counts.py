"""Counts are never stale (issue 10, item 7): two archival services of one agent over one database and one store
(two service instances, as a second process or a second daemon instance has) see each other's writes at once,
in their counts and in their searches; an agent with no memories still never opens the store for a prefetch."""

from __future__ import annotations

from datetime import timedelta

import pytest

from pagemind.runtime.memory.archival.memory import ArchivalService
from pagemind.runtime.memory.vectors.server import ServerBackend
from pagemind.runtime.spec.memory import ArchivalConfig
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.testing.clock import ManualClock
from pagemind.runtime.testing.embedder import FakeEmbedder
from tests.runtime.memory.archival.test_archival import ALICE, DIM, T0, backend, run, unit  # noqa: F401 (the backend fixture)

V = unit(1)
VECTORS = {"Lin plays the cello": V, "cello": V, "Lin plays the viola": V, "Lin no longer plays the cello": V}


@pytest.fixture
def pair(backend, tmp_path):
    """Two services of one agent over one database and one store, each with its own clock (one shared time)."""
    engine = make_engine(f"sqlite:///{tmp_path / 'state.db'}")
    clock = ManualClock(T0)

    def make() -> ArchivalService:
        return ArchivalService(
            ALICE,
            engine=engine,
            open_backend=lambda: backend,
            embedder=FakeEmbedder(VECTORS),
            config=ArchivalConfig(),
            clock=clock,
        )

    return make(), make(), clock


def test_a_second_instance_sees_an_insert_made_after_it_counted_nothing(pair):
    writer, reader, _ = pair
    assert reader.stats() == (0, ()) and run(reader.search("cello")) == []  # a count of 0, seen first
    run(writer.insert("Lin plays the cello", tags=["music"]))
    assert reader.stats() == (1, ("music",))
    assert [h.text for h in run(reader.search("cello"))] == ["Lin plays the cello"]


def test_forget_supersede_and_refresh_by_one_instance_show_in_the_other(pair):
    writer, reader, clock = pair
    first = run(writer.insert("Lin plays the cello", kind="preference", tags=["music"]))
    assert reader.stats()[0] == 1
    clock.advance(minutes=1)
    replaced = run(writer.insert("Lin no longer plays the cello", kind="preference", tags=["past"]))
    assert replaced.action == "superseded" and replaced.other_id == first.id
    assert reader.stats() == (1, ("past",))
    assert [h.text for h in run(reader.search("cello"))] == ["Lin no longer plays the cello"]
    run(writer.insert("Lin no longer plays the cello", kind="preference", tags=["hobby"]))  # a refresh: new tag
    assert reader.stats() == (1, ("hobby", "past"))
    assert run(writer.forget(replaced.id))
    assert reader.stats() == (0, ()) and run(reader.search("cello")) == []


def test_an_expiry_passing_changes_the_count_without_any_write(pair):
    writer, reader, clock = pair
    run(writer.insert("Lin plays the cello", expires_at=T0 + timedelta(hours=1)))
    assert reader.stats()[0] == 1
    clock.advance(hours=2)
    assert reader.stats() == (0, ()) and writer.stats() == (0, ())


def test_counts_on_both_databases(database_url):
    engine = make_engine(database_url)
    backend = ServerBackend.connect(":memory:", None, "pagemind_counts", DIM)
    try:
        a, b = (
            ArchivalService(
                ALICE,
                engine=engine,
                open_backend=lambda: backend,
                embedder=FakeEmbedder(VECTORS),
                clock=ManualClock(T0),
            )
            for _ in range(2)
        )
        assert b.stats() == (0, ())
        run(a.insert("Lin plays the cello", tags=["music", "hobby"]))
        assert b.stats() == (1, ("hobby", "music"))
        assert [h.text for h in run(b.search("cello"))] == ["Lin plays the cello"]
    finally:
        backend.close()


def test_no_memories_means_no_store_and_no_model(tmp_path):
    """An agent that never stored a memory: searching (the prefetch of every turn) opens neither the vector store
    nor the embedding model."""

    def refuse():
        raise AssertionError("the vector store was opened")

    embedder = FakeEmbedder()
    service = ArchivalService(
        ALICE,
        engine=make_engine(f"sqlite:///{tmp_path / 'state.db'}"),
        open_backend=refuse,
        embedder=embedder,
        clock=ManualClock(T0),
    )
    for _ in range(3):
        assert run(service.search("anything at all")) == []
    assert embedder.calls == 0
