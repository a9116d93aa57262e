"""Re-embedding: points for live memories the store lacks, embedded again from their SQL text, in batches.

The vector store is one per embedding model (`memory.stores`: named by model id and dimension), so changing the
model opens a new, empty store: every live memory is then "missing" there, and the reconcile that opening the
store runs (`memory.reconcile`) rebuilds them all from the SQL copy, here. Vector spaces never mix: a store only
ever holds the vectors of the model it is named for, and the old store is left as it was (switching back finds it).

Batches of `BATCH` are embedded and written one after the other, so the work is bounded in memory and a crash
loses at most one batch: the next open finds only the memories still missing and goes on from there (nothing to
record: the store itself says what is done). Progress is reported as structlog events (`archival_reembed_started`
and `archival_reembed_done` as warnings, seen at the default level: an open that takes minutes must say why;
`archival_reembed_progress` with counts at info, every `LOG_EVERY_S`) and, for a person waiting on a terminal, as a
progress bar on stderr when it is a terminal or the re-embed is large (never on stdout, never in a tool's output).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from typing import Any, TextIO

import structlog

from pagemind.runtime.memory.vectors.backend import AgentStore
from pagemind.runtime.memory.vectors.records import MemoryRecord, StoredPoint
from pagemind.runtime.process.crashpoints import crash_point

log = structlog.get_logger("pagemind.archival")

BATCH = 256  # memories embedded and written at a time
BAR_FROM = 1_000  # memories from which a bar is shown even when stderr is not a terminal (a log file shows it too)
LOG_EVERY_S = 5.0  # seconds between progress events (and always the first and the last)

Restore = Callable[[list[MemoryRecord]], list[StoredPoint]]


def reembed(
    store: AgentStore,
    records: list[MemoryRecord],
    restore: Restore,
    *,
    model: str = "",
    stream: TextIO | None = None,
    batch: int | None = None,
) -> int:
    """Write points for `records` (live memories the store lacks), embedded by `restore`, `batch` at a time;
    returns how many were written. Reports progress (see the module's docstring) on `stream` (stderr)."""
    total, batch = len(records), batch or BATCH
    if not total:
        return 0
    log.warning("archival_reembed_started", agent_id=store.agent_id, model=model, memories=total)
    done, started, logged = 0, time.monotonic(), time.monotonic()
    with _Bar(total, model, stream or sys.stderr) as bar:
        for start in range(0, total, batch):
            chunk = records[start : start + batch]
            store.upsert(restore(chunk))
            crash_point("archival.reembed.batch")
            done += len(chunk)
            bar.update(len(chunk))
            if time.monotonic() - logged >= LOG_EVERY_S or done in (len(chunk), total):
                logged = time.monotonic()
                log.info("archival_reembed_progress", agent_id=store.agent_id, model=model, done=done, total=total)
    log.warning(
        "archival_reembed_done",
        agent_id=store.agent_id,
        model=model,
        memories=total,
        seconds=round(time.monotonic() - started, 2),
    )
    return done


class _NoBar:
    def update(self, n: int) -> None:
        return None


class _Bar:
    """A context manager yielding something with `update(n)`: a tqdm bar on `stream` when one is wanted."""

    def __init__(self, total: int, model: str, stream: TextIO):
        self.total, self.model, self.stream = total, model, stream
        self._bar: Any = None

    def __enter__(self) -> Any:
        tty = _is_tty(self.stream)
        if not (tty or self.total >= BAR_FROM):
            return _NoBar()
        from tqdm import tqdm

        # Not a terminal (a daemon's log): a new state every 10 s at most, not a stream of carriage returns.
        self._bar = tqdm(
            total=self.total,
            file=self.stream,
            unit="memory",
            leave=True,
            desc=f"Re-embedding archival memories ({self.model})" if self.model else "Re-embedding archival memories",
            mininterval=0.5 if tty else 10.0,
        )
        return self._bar

    def __exit__(self, *_: object) -> None:
        if self._bar is not None:
            self._bar.close()


def _is_tty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or odd stream: no bar, the events still say it
        return False
