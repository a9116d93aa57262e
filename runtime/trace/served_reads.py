"""A replay's external memory: every read a turn makes is answered from the trace (`pagemind.runtime.memory.reads`).

A replay rebuilds the agent in a scratch store that holds its core memory and window but none of its archival or
recall memory. `ServedReads` answers each read with what the recording read (the comparator finds it by request:
`Comparator.served_read`), so the statistics, a search's candidates, a write's nearest neighbour come out as they
did, and the runtime's own code — ranking, the prompt, the tools, the write path into the scratch store — runs
on them for real. In a fork's live part reads go to the scratch store. A served read is handed on to an observer
that records reads (a fork's new trace), as a live read would be.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from pagemind.runtime.events import MemoryReadEvent
from pagemind.runtime.memory.reads import Codec
from pagemind.runtime.observer import TurnObserver, wants_reads
from pagemind.runtime.trace.comparison import Comparator

T = TypeVar("T")


class ServedReads:
    """The tape (`memory.reads.ReadTape`) of a replay: reads served from the trace `comparator` follows."""

    served = True

    def __init__(self, comparator: Comparator, observer: Callable[[], TurnObserver]):
        self.comparator, self.observer = comparator, observer

    def read(self, source: str, read: str, request: dict[str, Any], live: Callable[[], T], codec: Codec[T]) -> T:
        """The recorded result for this read (a divergence when the recording holds none); live after a fork."""
        if self.comparator.live:
            value = live()
        else:
            value = codec.load(self.comparator.served_read(source, read, request))
        hears = self.observer()
        if wants_reads(hears):
            hears.on_event(MemoryReadEvent(step=0, source=source, read=read, request=request, result=codec.dump(value)))
        return value
