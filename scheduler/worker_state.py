"""What the dispatcher keeps of its workers and decides for a submission: the dispatcher's and a lingering worker's
wake-ups, each worker's record with its one state, and where a submission goes (`Route`)."""

from __future__ import annotations

import asyncio
import enum
from dataclasses import dataclass

from pagemind.scheduler.queue.inbox_item import InboxItem


class Wake(asyncio.Event):
    """The dispatcher's wake-up. `set()` (a worker ended, a lease was swept, a notice without an agent, the
    triggers): look at the whole inbox. `arrival()`: only the agents `Dispatcher.arrived` named."""

    def __init__(self) -> None:
        super().__init__()
        self.scan = True

    def set(self) -> None:
        """Wake the dispatcher to scan the inbox."""
        self.scan = True
        super().set()

    def arrival(self) -> None:
        """Wake the dispatcher for the arrivals alone."""
        super().set()


class Linger(asyncio.Event):
    """A lingering worker's wake-up. `item`: an item a submission placed with it, claimed for it (`Route.HAND_OFF`);
    None: it claims the next item itself. `taken`: a submission is placing one with it now (it will be handed)."""

    def __init__(self) -> None:
        super().__init__()
        self.item: InboxItem | None = None
        self.taken = False


class WorkerState(enum.Enum):
    """What an agent's worker is doing; each worker is in exactly one state."""

    RUNNING = "running"  # claiming and running the agent's items: it holds a slot of `concurrency`
    LINGERING = "lingering"  # the agent's inbox is empty: it keeps the lease and turn lock for `linger_s`, no slot
    WAITING_FOR_SLOT = "waiting_for_slot"  # woken from its linger: waits for a slot (more may linger than there are)


@dataclass(eq=False)
class Worker:
    """One agent's worker in this process: its task, its state, and what it was told while it ran."""

    task: asyncio.Task[None]
    state: WorkerState = WorkerState.RUNNING
    linger: Linger | None = None  # its wake-up, while it lingers
    lost: bool = False  # another daemon took its lease over (a stall): it stops after the item
    poked: bool = False  # a submission committed while it ran: it claims again before lingering


class Route(enum.Enum):
    """Where a submission for an agent goes: decided once, by `Dispatcher.route`, in the submission's synchronous
    stretch (no await between the decision and acting on it)."""

    HAND_OFF = "hand"  # a worker here lingers on it: the insert claims the item for that worker, with the turn's
    # user message (`scheduler.queue.inbox.HandOff`; `DaemonConfig.hand_off`)
    HELD_HERE = "held"  # a worker here runs or lingers on it: it claims the item next (woken if it lingers); no
    # notice (its lease is ours: no one else could take it)
    TAKE_HERE = "take"  # a slot is free here: taken at once; the notice names this daemon
    ANNOUNCE = "announce"  # no room here: the notice lets any daemon with room take it
