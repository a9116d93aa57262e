"""What archival memory reads from its stores for a turn, each read through the agent's tape (`memory.reads`).

The reads sit below the service's decisions: a search's candidates (dense and keyword hits that are live), the
vectors of candidates the store did not score, the write path's nearest neighbours, the active days, the
statistics. Ranking, deduplication and everything a turn shows are computed from them in `memory.archival.memory`,
so a replay served these reads still runs that code. A served neighbour is also put into the (scratch) store,
since the write path then changes it by id (a refresh, a supersede) and must find it there.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime
from typing import Any, Protocol

import numpy as np

from pagemind.runtime.memory.archival.ledger import Ledger, new_token
from pagemind.runtime.memory.lifecycle.activity import ActiveDays, Activity
from pagemind.runtime.memory.reads import UNRECORDED, Codec, ReadTape
from pagemind.runtime.memory.vectors.backend import AgentStore
from pagemind.runtime.memory.vectors.index import PLAN
from pagemind.runtime.memory.vectors.records import Hit, MemoryFilter, MemoryRecord, Sparse, StoredPoint

SOURCE = "archival"
NEIGHBOURS = 4  # nearest candidates the write path looks through for the nearest settled one

Stats = tuple[int, tuple[str, ...]]
Candidates = tuple[list[Hit], list[Hit]]


def _hit_data(hit: Hit) -> dict[str, Any]:
    return {"record": hit.record.model_dump(mode="json"), "score": hit.score, "cosine": hit.cosine}


class ArchivalParts(Protocol):
    """What the reads use of the archival service (`memory.archival.memory.ArchivalService`)."""

    agent_id: int
    activity: ActiveDays
    ledger: Ledger

    @property
    def store(self) -> AgentStore:
        """The agent's vector store, opened on first use."""

    def points(self, records: list[MemoryRecord]) -> list[StoredPoint]:
        """Points for memories read from elsewhere, embedded again from their text."""


class ArchivalReads:
    """One agent's archival reads, through `tape` (live and unrecorded until an agent gives it its own)."""

    def __init__(self, service: ArchivalParts, tape: ReadTape = UNRECORDED):
        self.service = service
        self.tape = tape

    @property
    def served(self) -> bool:
        """Whether reads come from a recording (a replay) rather than the stores."""
        return self.tape.served

    # -- codecs -------------------------------------------------------------------------------------------------

    def _hit(self, data: dict[str, Any]) -> Hit:
        # A recorded record belongs to the recorded agent; here it is this agent's (a replay's scratch agent).
        record = MemoryRecord.model_validate(data["record"] | {"agent_id": self.service.agent_id})
        return Hit(record, float(data["score"]), None if data.get("cosine") is None else float(data["cosine"]))

    def _hits(self) -> Codec[Candidates]:
        return Codec(
            dump=lambda found: {"dense": [_hit_data(h) for h in found[0]], "keyword": [_hit_data(h) for h in found[1]]},
            load=lambda data: ([self._hit(h) for h in data["dense"]], [self._hit(h) for h in data["keyword"]]),
        )

    # -- the reads ----------------------------------------------------------------------------------------------

    def stats(self, live: Callable[[], Stats]) -> Stats:
        """(live memories, tags in use) now."""
        codec: Codec[Stats] = Codec(
            dump=lambda value: [value[0], list(value[1])], load=lambda data: (int(data[0]), tuple(data[1]))
        )
        return self.tape.read(SOURCE, "stats", {}, live, codec)

    def may_find(self, dated: bool, live: Callable[[], bool]) -> bool:
        """Whether a search (with a date range: `dated`) could find anything at all."""
        return self.tape.read(SOURCE, "may_find", {"dated": dated}, live, Codec(dump=bool, load=bool))

    def activity(self, now: datetime) -> Activity:
        """The agent's active days up to `now` (what disuse is counted in)."""
        codec: Codec[Activity] = Codec(
            dump=lambda a: {"days": [d.isoformat() for d in a.days], "today": a.today.isoformat()},
            load=lambda data: Activity(
                tuple(date.fromisoformat(d) for d in data["days"]), date.fromisoformat(data["today"])
            ),
        )
        return self.tape.read(
            SOURCE, "activity", {"now": now.isoformat()}, lambda: self.service.activity.at(now), codec
        )

    def candidates(
        self, text: str, mode: str, flt: MemoryFilter, limit: int, vector: np.ndarray | None, sparse: Sparse | None
    ) -> Candidates:
        """One search round's live candidates for `text`: dense hits and keyword hits, as the store scored them."""

        def live() -> Candidates:
            service = self.service
            dense_hits, keyword_hits = service.store.search_hybrid(vector, sparse, flt, limit)
            settled = service.ledger.live_ids([h.record.id for h in [*dense_hits, *keyword_hits]])
            return [h for h in dense_hits if h.record.id in settled], [
                h for h in keyword_hits if h.record.id in settled
            ]

        request = {"text": text, "mode": mode, "limit": limit, "filter": flt.model_dump(mode="json", exclude_none=True)}
        return self.tape.read(SOURCE, "candidates", request, live, self._hits())

    def vectors(self, ids: list[str]) -> dict[str, np.ndarray]:
        """The dense vectors of these memories (candidates the dense side did not score)."""
        codec: Codec[dict[str, np.ndarray]] = Codec(
            dump=lambda found: {i: v.tolist() for i, v in found.items()},
            load=lambda data: {i: np.asarray(v, dtype=np.float32) for i, v in data.items()},
        )
        return self.tape.read(SOURCE, "vectors", {"ids": ids}, lambda: self.service.store.dense_vectors(ids), codec)

    def neighbour(self, text: str, vector: np.ndarray, kind: str, now: datetime) -> Hit | None:
        """The nearest settled memory of this kind to a memory about to be written (`text`), if any."""

        def live() -> Hit | None:
            service = self.service
            flt = MemoryFilter(kinds=[kind], live_at=now)
            hits = service.store.search_dense(vector, flt, NEIGHBOURS, ef=PLAN.neighbour_ef)
            settled = service.ledger.live_ids([h.record.id for h in hits]) if hits else set()
            return next((h for h in hits if h.record.id in settled), None)

        codec: Codec[Hit | None] = Codec(
            dump=lambda hit: None if hit is None else _hit_data(hit),
            load=lambda data: None if data is None else self._hit(data),
        )
        request = {"text": text, "kind": kind, "now": now.isoformat()}
        found = self.tape.read(SOURCE, "neighbour", request, live, codec)
        if found is not None and self.served:
            self._adopt(found.record)
        return found

    def _adopt(self, record: MemoryRecord) -> None:
        """A served memory into the store as it was read, unless it is there already (the write path changes
        it by id next)."""
        service = self.service
        if service.ledger.rows([record.id]):
            return
        store = service.store  # opened before the row is written, as every write does
        service.ledger.begin_insert(record, new_token(), None, {"replayed": "read from the trace"})
        store.upsert(service.points([record]))
        service.ledger.complete_insert(record.id)
