"""Re-keying vector-store points written by pagemind 0.1.0 (keyed by the agent's name) to the agent's id."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

import numpy as np
import pytest
import sqlalchemy

from pagemind.runtime.memory.archival import rekey
from pagemind.runtime.memory.vectors.backend import AgentStore
from pagemind.runtime.memory.vectors.edge import EdgeBackend
from pagemind.runtime.memory.vectors.records import DENSE, MemoryRecord, Sparse, StoredPoint
from pagemind.runtime.memory.vectors.server import ServerBackend
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.tables.archival import archival_rekeyed_stores, archival_rekeys

DIM = 8
T0 = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)


@pytest.fixture(params=["edge", "server"])
def backend(request, tmp_path):
    """Both adapters: Qdrant Edge on disk, and qdrant-client's in-memory mode standing in for a server."""
    b = (
        EdgeBackend(tmp_path / "qdrant", DIM)
        if request.param == "edge"
        else ServerBackend.connect(":memory:", None, "pagemind_rekey", DIM)
    )
    yield b
    b.close()


def vector(n: int) -> np.ndarray:
    v = np.zeros(DIM, dtype=np.float32)
    v[n % DIM] = 1.0
    return v


def write_legacy_point(backend, name: str, text: str) -> str:
    """A point as 0.1.0 wrote it: the agent's name in `agent_id`, no `payload_version`."""
    record = MemoryRecord(agent_id=0, text=text, created_at=T0, updated_at=T0)
    payload = {**record.payload(), "agent_id": name}
    del payload["payload_version"]
    if isinstance(backend, EdgeBackend):
        point = backend.qe.Point(uuid.UUID(record.id), {DENSE: vector(len(text))}, payload)
        backend.shard.update(backend.qe.UpdateOperation.upsert_points([point]))
        backend.shard.flush()
    else:
        from qdrant_client import models as m

        point = m.PointStruct(id=record.id, vector={DENSE: vector(len(text)).tolist()}, payload=payload)
        backend.client.upsert(backend.collection, [point], wait=True)
    return record.id


class CrashingBackend:
    """The backend, but the process 'dies' on the second re-keying call."""

    def __init__(self, inner):
        self.inner, self.location, self.calls = inner, inner.location, 0

    def rekey(self, old_key: str, agent_id: int) -> None:
        self.calls += 1
        if self.calls == 2:
            raise KeyboardInterrupt("killed")
        self.inner.rekey(old_key, agent_id)


def texts(backend, agent_id: int) -> list[str]:
    return sorted(r.text for r in AgentStore(backend, agent_id).all())


def test_rekeying_is_crash_safe_idempotent_and_cannot_capture_another_agents_points(backend, tmp_path):
    engine = make_engine(f"sqlite:///{tmp_path / 'state.db'}")
    # Agent 1 was called "2" (a name that looks like agent 2's id); agent 2 was called "x".
    with engine.begin() as conn:
        conn.execute(archival_rekeys.insert(), [{"old_key": "2", "agent_id": 1}, {"old_key": "x", "agent_id": 2}])
    write_legacy_point(backend, "2", "one of agent 1")
    write_legacy_point(backend, "2", "another of agent 1")
    write_legacy_point(backend, "x", "old of agent 2")
    # Agent 2 already wrote with today's code (keyed by its id, "2") before agent 1's old key was moved.
    AgentStore(backend, 2).upsert(
        [
            StoredPoint(
                MemoryRecord(agent_id=2, text="new of agent 2", created_at=T0, updated_at=T0), vector(3), Sparse([], [])
            )
        ]
    )

    with pytest.raises(KeyboardInterrupt):
        rekey.complete_rekeys(engine, CrashingBackend(backend))
    assert texts(backend, 1) == ["another of agent 1", "one of agent 1"]  # the first key moved, nothing else
    assert texts(backend, 2) == ["new of agent 2"]
    with engine.connect() as conn:
        assert conn.execute(sqlalchemy.select(archival_rekeyed_stores)).all() == []  # not done: runs again

    assert rekey.complete_rekeys(engine, backend) == 2
    assert texts(backend, 1) == ["another of agent 1", "one of agent 1"]
    assert texts(backend, 2) == ["new of agent 2", "old of agent 2"]
    assert {r.agent_id for r in AgentStore(backend, 2).all()} == {2}
    with engine.connect() as conn:
        assert conn.execute(sqlalchemy.select(archival_rekeyed_stores.c.store)).scalars().all() == [backend.location]

    rekey._DONE.clear()  # a new process: the store is known done from SQL, nothing is scanned again
    untouched = CrashingBackend(backend)
    assert rekey.complete_rekeys(engine, untouched) == 0 and untouched.calls == 0
    engine.dispose()
