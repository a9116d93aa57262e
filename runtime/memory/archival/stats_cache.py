"""The archival statistics (live memories, tags in use) of one agent, cached against its revision.

Counts always come from SQL (another process or service instance sees every write at once); the cache is
checked against the agent's revision, one primary-key read, and recomputed when a memory expires. In a turn
(`turn`) that read happens once: the statistics are those of the turn's start plus the turn's own writes, and the
prompt's compile and the prefetch's emptiness check share them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import datetime

from pagemind.runtime.memory.archival.ledger import Ledger

__all__ = ["StatsCache"]


@dataclass(frozen=True)
class _Stats:
    revision: int
    rows: list[tuple[list[str], datetime | None]]
    valid_from: datetime
    valid_until: datetime | None  # the next expiry after valid_from: the live set changes then
    value: tuple[int, tuple[str, ...]]


class StatsCache:
    """One agent's archival statistics, read from its ledger when its revision moved."""

    def __init__(self, ledger: Ledger, clock: Callable[[], datetime]):
        self.ledger = ledger
        self.clock = clock
        self._stats: _Stats | None = None
        self._in_turn = False
        self._seen_at: int | None = None  # in a turn: `ledger.writes` when the revision was last read
        self._turn_revision: int | None = None  # the revision the turn read at its start, until first used

    def value(self) -> tuple[int, tuple[str, ...]]:
        """(live memories, tags in use by them) now: whoever wrote them, whatever expired since."""
        now = self.clock()
        cached = self._stats
        writes = self.ledger.writes  # taken first: a write during the read makes the next call read again
        if cached is None or not self._revision_checked(cached, writes):
            revision, rows = self.ledger.stats_rows()
            cached = self._stats = self._count(revision, rows, now)
            self._checked(writes)
        elif not (cached.valid_from <= now and (cached.valid_until is None or now < cached.valid_until)):
            cached = self._stats = self._count(cached.revision, cached.rows, now)
        return cached.value

    def may_find(self, dated: bool) -> bool:
        """False when the agent has no memory a search could return (`dated`: a search with a date range, which
        also finds expired memories). A cached count above 0 is taken without a read: were it stale, the search
        would only find nothing (it reads what is live)."""
        if self._stats is not None and self._stats.value[0] > 0:
            return True
        return self.value()[0] > 0 or (dated and bool(self._stats and self._stats.rows))

    @contextlib.contextmanager
    def turn(self, revision: int | None = None) -> Iterator[None]:
        """Within the block (one turn, under the agent's turn lock) the revision is read once, and again only
        after this agent's ledger wrote; `revision` (read at the turn's start with its other checks) stands for
        the first read. Another process's writes show from the next turn (at once outside a turn). A block opened
        inside another changes nothing (the outer block's revision and reads stand)."""
        if self._in_turn:
            yield
            return
        self._in_turn, self._seen_at, self._turn_revision = True, None, revision
        try:
            yield
        finally:
            self._in_turn, self._seen_at, self._turn_revision = False, None, None

    def _revision_checked(self, cached: _Stats, writes: int) -> bool:
        """Whether `cached` is of the current revision: read from SQL, unless a read this turn saw it and the
        ledger wrote nothing since (`writes`: its count of writes before this check)."""
        if self._in_turn and self._seen_at == writes:
            return True
        given, self._turn_revision = self._turn_revision, None  # the turn's start stands for one read only
        current = cached.revision == (self.ledger.revision() if given is None else given)
        if current:
            self._checked(writes)
        return current

    def _checked(self, writes: int) -> None:
        """In a turn, remember that the revision was read while the ledger had made `writes` writes."""
        self._turn_revision = None  # read now: the turn's start no longer stands for anything
        if self._in_turn:
            self._seen_at = writes

    @staticmethod
    def _count(revision: int, rows: list[tuple[list[str], datetime | None]], now: datetime) -> _Stats:
        live = [tags for tags, expires in rows if expires is None or expires > now]
        later = [expires for _, expires in rows if expires is not None and expires > now]
        return _Stats(
            revision,
            rows,
            now,
            min(later, default=None),
            (len(live), tuple(sorted({t for tags in live for t in tags}))),
        )
