"""Changing the embedding model re-embeds archival memory from its SQL copy (issue 14, item 1): every live memory
gets a point in the new model's store, with progress reported; searches then use the new vectors only; a failure
part-way resumes on the next open. (A SIGKILL part-way: tests/crash/test_archival_crash.py.)"""

from __future__ import annotations

import io
import logging

import numpy as np
import pytest
import structlog

from pagemind.runtime.memory.archival import reconcile as reconcile_module
from pagemind.runtime.memory.archival import reembed as reembed_module
from pagemind.runtime.memory.archival.memory import ArchivalService
from pagemind.runtime.memory.vectors.records import MemoryFilter
from pagemind.runtime.memory.vectors.stores import close_all, open_backend
from pagemind.runtime.process.logs import configure_logging
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.testing.clock import ManualClock
from pagemind.runtime.testing.embedder import FakeEmbedder
from pagemind.runtime.testing.step_context import tool_context
from pagemind.tools import BUILTIN_TOOLS, ToolCall, dispatch_tool_calls
from tests.runtime.memory.archival.test_archival import ALICE, DIM, T0, run, unit

TEXTS = [
    "Lin lives in Lyon",
    "Lin plays the cello",
    "Lin drinks green tea",
    "Lin adopted a cat named Miso",
    "Lin works at the bakery",
]
# The two models put the memories in different places: a query near one memory in A is near another in B.
OLD = {t: unit(*([0] * n + [1])) for n, t in enumerate(TEXTS)} | {"what does Lin play?": unit(1)}
NEW = {t: unit(*([0] * (10 + n) + [1])) for n, t in enumerate(TEXTS)} | {"what does Lin play?": unit(*[0] * 11 + [1])}


@pytest.fixture
def world(database_url, tmp_path, monkeypatch):
    """`service(model_id, vectors)`: alice's archival memory with that model, its store opened as a process opens
    it (one per model, under tmp_path); each call a fresh process's view (nothing reconciled yet)."""
    engine = make_engine(database_url)

    def service(model_id: str, vectors: dict) -> ArchivalService:
        monkeypatch.setattr(reconcile_module, "_DONE", type(reconcile_module._DONE)())  # a new process
        embedder = FakeEmbedder(vectors, model_id=model_id)
        return ArchivalService(
            ALICE,
            engine=engine,
            clock=ManualClock(T0),
            embedder=embedder,
            open_backend=lambda: open_backend(tmp_path, DIM, model_id),
        )

    yield service
    close_all()
    engine.dispose()


def stored(old: ArchivalService) -> dict[str, str]:
    """Memories written with the old model (one forgotten), by text."""
    ids = {t: run(old.insert(t)).id for t in TEXTS}
    assert run(old.forget(ids.pop(TEXTS[-1])))
    return ids


@pytest.fixture
def info_events():
    """Info events reach `capture_logs` (the suite logs at WARNING)."""
    structlog.configure(wrapper_class=structlog.make_filtering_bound_logger(logging.INFO))
    yield
    configure_logging("WARNING")


def test_switching_the_model_reembeds_every_live_memory_into_its_own_store(world, monkeypatch, info_events):
    monkeypatch.setattr(reembed_module, "BATCH", 2)
    monkeypatch.setattr(reembed_module, "LOG_EVERY_S", 0.0)
    ids = stored(world("model-a", OLD))
    new = world("model-b", NEW)
    with structlog.testing.capture_logs() as logs:
        found = run(new.search("what does Lin play?", mode="dense", count_hits=False))
    assert found[0].id == ids["Lin plays the cello"]
    assert set(new.embedder.texts) >= set(ids) and TEXTS[-1] not in new.embedder.texts  # live memories only
    assert new.store.ids() == set(ids.values())
    for text, memory_id in ids.items():  # each point holds the new model's vector of its text
        [hit] = new.store.search_dense(NEW[text], MemoryFilter(), 1, exact=True)
        assert hit.record.id == memory_id and hit.score == pytest.approx(1.0, abs=1e-5)
    events = [e for e in logs if e["event"].startswith("archival_reembed")]
    assert [e["event"] for e in events] == ["archival_reembed_started"] + ["archival_reembed_progress"] * 2 + [
        "archival_reembed_done"
    ]
    assert [e.get("done") for e in events[1:3]] == [2, 4] and {e["model"] for e in events} == {"model-b"}
    assert events[0]["memories"] == 4 and all(e.get("total", 4) == 4 for e in events)
    old = world("model-a", OLD)  # the old store is left as it was: switching back re-embeds nothing
    with structlog.testing.capture_logs() as logs:
        assert old.store.ids() == set(ids.values())
    assert not [e for e in logs if e["event"].startswith("archival_reembed")]


def test_a_reembed_cut_short_resumes_on_the_next_open_without_mixing(world, monkeypatch):
    monkeypatch.setattr(reembed_module, "BATCH", 1)
    ids = stored(world("model-a", OLD))
    failing = world("model-b", NEW)
    calls = []

    def embed_then_fail(texts):
        calls.append(list(texts))
        if len(calls) == 3:
            raise ConnectionError("the embeddings endpoint went away")
        return FakeEmbedder(NEW, model_id="model-b").embed(texts)

    monkeypatch.setattr(failing.embedder, "embed", embed_then_fail)
    with pytest.raises(ConnectionError):
        failing.store
    written = {t for batch in calls[:2] for t in batch}
    resumed = world("model-b", NEW)
    assert resumed.store.ids() == set(ids.values())
    assert not written & set(resumed.embedder.texts)  # only what was still missing was embedded again
    assert set(resumed.embedder.texts) == set(ids) - written
    for text, memory_id in ids.items():
        [hit] = resumed.store.search_dense(NEW[text], MemoryFilter(), 1, exact=True)
        assert hit.record.id == memory_id and hit.score == pytest.approx(1.0, abs=1e-5)


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def _records(n: int):
    from pagemind.runtime.memory.vectors.records import MemoryRecord

    return [
        MemoryRecord(agent_id=ALICE, text=f"memory {k}", kind="fact", created_at=T0, updated_at=T0) for k in range(n)
    ]


class _Store:
    agent_id = ALICE

    def __init__(self) -> None:
        self.points: list = []

    def upsert(self, points: list) -> None:
        self.points += points


def test_the_progress_bar_is_shown_on_a_terminal_or_for_a_large_reembed_only():
    restore = lambda records: [(r, np.zeros(DIM)) for r in records]  # noqa: E731
    for stream, count, shown in (
        (_Terminal(), 3, True),
        (io.StringIO(), 3, False),
        (io.StringIO(), reembed_module.BAR_FROM, True),
    ):
        store = _Store()
        assert reembed_module.reembed(store, _records(count), restore, model="model-b", stream=stream) == count
        assert len(store.points) == count
        assert ("Re-embedding archival memories (model-b)" in stream.getvalue()) is shown
        assert (f"{count}/{count}" in stream.getvalue()) is shown


def test_the_bar_goes_to_a_terminals_stderr_never_into_the_tools_output(world, monkeypatch):
    stored(world("model-a", OLD))
    terminal = _Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    context = tool_context("alice", archival=world("model-b", NEW), clock=ManualClock(T0))
    [result] = run(
        dispatch_tool_calls(
            [ToolCall("1", "archival_search", '{"query": "what does Lin play?"}')], BUILTIN_TOOLS, context
        )
    )
    assert not result.is_error and result.content.splitlines()[1].endswith("Lin plays the cello")
    assert "Re-embedding" not in result.content and "Re-embedding archival memories (model-b)" in terminal.getvalue()
