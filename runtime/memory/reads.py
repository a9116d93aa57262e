"""Where external memory's reads go: the stores (live, reported to whoever records them) or a trace (replay).

Every read that archival and recall memory make on behalf of a turn — the statistics in the prompt, the
candidates a search ranks, a write's nearest neighbour, the active days decay counts in, a conversation search —
goes through one `ReadTape.read` call, named (`source`, `read`) with what it asked (`request`, JSON). Live
(`LiveReads`, every agent's), the read runs against the stores, and an observer that wants reads (the trace
recorder: `observer.wants_reads`) is handed a `MemoryReadEvent` with the result in JSON. A replay's tape
(`pagemind.runtime.trace.served_reads`) answers from the recording instead, so a turn sees the memory it saw
when it was recorded, however much memory that was, while everything after the read — ranking, the prompt,
the tools, the writes into a scratch store — runs for real. A read is served at the level below pagemind's
own decisions (candidates before ranking), so a change in those decisions still shows in the replay.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from pagemind.runtime.events import MemoryReadEvent
from pagemind.runtime.observer import TurnObserver, wants_reads

T = TypeVar("T")


@dataclass(frozen=True)
class Codec(Generic[T]):
    """How one read's result is written into a trace (`dump`, to JSON-able data) and read back (`load`)."""

    dump: Callable[[T], Any]
    load: Callable[[Any], T]


class ReadTape(Protocol):
    """Runs (or serves) one named read."""

    served: bool
    """True when reads come from a recording rather than the stores (the stores then lack what was read)."""

    def read(self, source: str, read: str, request: dict[str, Any], live: Callable[[], T], codec: Codec[T]) -> T:
        """The read's result: `live()` against the stores, or what the recording holds for this request."""


class LiveReads:
    """Reads against the stores, each reported to the current observer when it wants reads."""

    served = False

    def __init__(self, observer: Callable[[], TurnObserver] | None = None):
        self.observer = observer  # who hears a read now (an agent's listener: its observer and its run's)

    def read(self, source: str, read: str, request: dict[str, Any], live: Callable[[], T], codec: Codec[T]) -> T:
        """Run the read; report it (result in JSON) to an observer that wants reads."""
        value = live()
        hears = self.observer() if self.observer is not None else None
        if hears is not None and wants_reads(hears):
            hears.on_event(MemoryReadEvent(step=0, source=source, read=read, request=request, result=codec.dump(value)))
        return value


UNRECORDED = LiveReads()
"""The tape of memory nobody records (inspection from the CLI, a service built outside an agent)."""
