"""The window: an agent's in-context state and the only code that changes it.

What the model sees besides its core blocks lives here: the messages in view, the recursive summary of what
left the view, the warning-cycle flag, the per-agent token correction and the number of messages in recall
memory. Every change is written through the state store first and adopted in memory only once it is stored,
so the in-memory window never runs ahead of the database, with one exception: a step the loop holds (`hold`) is
in view before it is stored, and is stored first by the next commit of its turn, in the same transaction, or taken
back out of view when the turn fails (`drop_held`). The pressure monitor decides *when* to change the window
(policy); this module is *how* (mechanism).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING

from pagemind.blocks import BlockEdit
from pagemind.runtime.compiler import WireCache
from pagemind.runtime.messages import Message, rebound
from pagemind.runtime.process.crashpoints import crash_point
from pagemind.runtime.state.conversation.step_commit import LinkedWrite, StepWrite
from pagemind.runtime.state.records import AgentRecord, StepRecord
from pagemind.runtime.state.store import StateStore

if TYPE_CHECKING:
    from pagemind.runtime.state.agent_load import StoredAgent


@dataclass
class Window:
    """One agent's in-context state, backed by the store (see the module docstring)."""

    store: StateStore
    agent_id: int
    messages: list[Message]
    summary: str
    warned: bool
    correction: float
    recall_count: int
    # The newest message id this window has seen: any turn stores a message, so a larger id in the store means
    # another process ran a turn since, and this window (and the agent's blocks) must be read again.
    seen: int = 0
    # The version of each core block the agent's values were read (or last written) at; every block write is
    # checked against it (`StateStore.commit_step`).
    block_versions: dict[str, int] = field(default_factory=dict)
    # The archival statistics' revision as of the last `is_stale` (None before): the turn's archival statistics
    # are checked against it rather than read again (`ArchivalService.turn_stats`).
    archival_revision: int | None = None
    # The wire form of the messages last compiled, reused by the next compile for what did not change.
    wire_cache: WireCache = field(default_factory=WireCache, repr=False, compare=False)
    # Steps of the turn in progress that are in view but not stored yet (`hold`).
    held: list[StepWrite] = field(default_factory=list, repr=False, compare=False)
    # The stored copies that last took held messages' places, by the held message's `id()`, and a count of such
    # replacements: caches keyed on the view's objects (the compiler's, the monitor's) move to the copies.
    copies: dict[int, Message] = field(default_factory=dict, repr=False, compare=False)
    copied: int = 0

    @classmethod
    def load(cls, store: StateStore, record: AgentRecord) -> Window:
        """The window as stored for the agent `record` names."""
        seen = store.last_message_id(record.id)  # read first: a message stored meanwhile reads as "stale", not lost
        return cls(
            store=store,
            agent_id=record.id,
            messages=context_order(store.in_context_messages(record.id)),
            summary=record.summary,
            warned=record.pressure_warned,
            correction=record.token_correction,
            recall_count=store.message_count(record.id),
            seen=seen,
        )

    @classmethod
    def from_stored(cls, store: StateStore, stored: StoredAgent) -> Window:
        """The window from what `state.agent_load.read_unchanged` read (the same state as `load`)."""
        record = stored.record
        return cls(
            store=store,
            agent_id=record.id,
            messages=context_order(stored.messages),
            summary=record.summary,
            warned=record.pressure_warned,
            correction=record.token_correction,
            recall_count=stored.message_count,
            seen=stored.newest,
            block_versions=stored.versions,
        )

    async def is_stale(self) -> bool:
        """Whether another process stored a message or edited a block since this window read its state."""
        fresh = await self.store.freshness(self.agent_id)
        self.archival_revision = fresh.archival_revision
        return fresh.newest != self.seen or any(
            fresh.versions.get(label) != version for label, version in self.block_versions.items()
        )

    def reload(self) -> None:
        """Read the window again from the store, in place (the caller reloads the blocks and their versions)."""
        fresh = Window.load(self.store, self.store.agent_record(self.agent_id))
        self.messages, self.summary, self.warned = fresh.messages, fresh.summary, fresh.warned
        self.correction, self.recall_count, self.seen = fresh.correction, fresh.recall_count, fresh.seen

    async def accept(self, message: Message, key: str | None = None) -> list[Message]:
        """Store an incoming message durably (the inbox), with the turn's idempotency key if any, then put it in
        view. Held steps are stored first, so that ids keep the order of the view."""
        await self.commit_held()
        stored = [await self.store.accept_message(self.agent_id, message, key)]
        self._adopt(stored)
        return stored

    def adopt_accepted(self, message: Message) -> list[Message]:
        """Put in view a turn's incoming message stored already, with its inbox item (`StateStore.accept_message`'s
        `after`), unless this window has read it from the store since (it was loaded or reloaded); returns it."""
        if message.id is not None and message.id > self.seen:
            self._adopt([message])
        return [message]

    async def answer(self, results: list[Message]) -> list[Message]:
        """Store the results of a paused turn's open calls (an app's, or the ones saying it sent none: see
        `runtime.app_calls`) in one transaction, then put them in view after their calls."""
        await self.commit_held()
        stored = await self.store.apply_repair(self.agent_id, results, [])
        self._adopt(stored)
        return stored

    async def commit_step(
        self, record: StepRecord, messages: list[Message], edits: list[BlockEdit], rider: LinkedWrite | None = None
    ) -> tuple[int, list[Message]]:
        """Store a step's record, messages and block edits in one transaction (with `rider`'s write, if given), then
        put the messages in view; any held steps are stored before it, in the same transaction. Returns the step's
        id and every message stored (the held steps' first).

        Block edits are written only at the versions in `block_versions` (`StaleBlocks` otherwise)."""
        step_ids, stored = await self._commit(StepWrite(record, messages, edits), rider)
        return step_ids[-1], stored

    def hold(self, record: StepRecord, messages: list[Message], edits: list[BlockEdit]) -> None:
        """Put a step in view without storing it: the turn's next commit stores it first, in its transaction (one
        round trip for both). For a step whose effects all commit with it (`runtime.loop`): a crash before that
        commit loses it whole, and the turn redoes it."""
        self.held.append(StepWrite(record, list(messages), list(edits)))
        self.messages += messages
        self.recall_count += len(messages)

    async def commit_held(self) -> None:
        """Store the held steps now (before a write that must come after them)."""
        if self.held:
            await self._commit(None)

    def drop_held(self) -> bool:
        """Take the held steps back out of view, unstored (their turn failed before its next commit); returns
        whether there were any."""
        if not self.held:
            return False
        held = {id(m) for write in self.held for m in write.messages}
        self.messages = [m for m in self.messages if id(m) not in held]
        self.recall_count -= len(held)
        self.held = []
        return True

    async def _commit(
        self, step: StepWrite | None, rider: LinkedWrite | None = None
    ) -> tuple[list[int], list[Message]]:
        """Store the held steps and then `step` (if any) in one transaction; the stored copies replace the held
        messages in view, and `step`'s messages join them."""
        steps = [*self.held, step] if step is not None else list(self.held)
        step_ids, stored = await self.store.commit_steps(self.agent_id, steps, self.block_versions, rider)
        crash_point("window.before_adopt")
        held = [m for write in self.held for m in write.messages]
        if held:  # the stored copies take the held messages' places (and their wire forms, unchanged)
            self.copies, self.copied = dict(zip(map(id, held), stored, strict=False)), self.copied + 1
            self.messages = list(rebound(self.messages, self.copies))
            self.wire_cache.rebind(self.copies)
            self.seen = max([self.seen, *(m.id or 0 for m in stored[: len(held)])])
            self.held = []
        self._adopt(stored[len(held) :])
        return step_ids, stored

    def unanswered(self, text: str) -> Message | None:
        """The user message with this text that a failed turn left unanswered at the end of the window (nothing
        but system alerts after it, so no step of its turn committed), or None. A retry reuses it."""
        for message in reversed(self.messages):
            if message.role == "user":
                return message if message.content == text and message.turn_id else None
            if message.role != "system":
                return None
        return None

    async def evict(
        self, count: int, summary: str, tokens_before: int, tokens_after: int, at: datetime
    ) -> list[Message]:
        """Take the oldest `count` messages out of view and install the new summary; starts a new warning cycle.

        The messages stay in recall memory. Returns the evicted messages.
        """
        evicted = self.messages[:count]
        await self.store.evict(
            self.agent_id, [m.id for m in evicted if m.id is not None], summary, tokens_before, tokens_after, at
        )
        self.messages = self.messages[count:]
        self.summary, self.warned = summary, False
        return evicted

    async def repair(self, repaired: list[Message], added: list[Message], dropped: list[Message]) -> list[Message]:
        """Adopt a repaired history: store the synthetic messages in `added`, take `dropped` out of view.

        `repaired` is the new window in order, holding the unstored `added` messages; they are replaced by
        their stored copies. Returns the stored additions.
        """
        stored = await self.store.apply_repair(self.agent_id, added, [m.id for m in dropped if m.id])
        by_call = {m.tool_call_id: m for m in stored}
        added_ids = {id(m) for m in added}
        self.messages = [by_call.get(m.tool_call_id, m) if id(m) in added_ids else m for m in repaired]
        self.recall_count += len(stored)
        self.seen = max([self.seen, *(m.id or 0 for m in stored)])
        return stored

    async def mark_warned(self) -> None:
        """Record that this cycle's pressure warning was given."""
        await self.store.set_pressure_state(self.agent_id, warned=True)
        self.warned = True

    async def set_correction(self, correction: float) -> None:
        """Keep a new token correction factor (estimated tokens × factor ≈ what the provider counts)."""
        await self.store.set_pressure_state(self.agent_id, correction=correction)
        self.correction = correction

    async def restore(
        self, messages: Sequence[Message], summary: str, warned: bool, correction: float, recall_count: int
    ) -> None:
        """Put a recorded window in place (replays rebuild the agent a trace started from in a scratch store)."""
        stored = self.store.append_messages(self.agent_id, messages)
        await self.store.set_pressure_state(self.agent_id, warned=warned, correction=correction, summary=summary)
        self.messages = context_order([*self.messages, *stored])
        self.summary, self.warned, self.correction = summary, warned, correction
        self.recall_count = recall_count
        self.seen = max([self.seen, *(m.id or 0 for m in stored)])

    def _adopt(self, stored: list[Message]) -> None:
        self.messages += stored
        self.recall_count += len(stored)
        self.seen = max([self.seen, *(m.id or 0 for m in stored)])


def context_order(messages: Sequence[Message]) -> list[Message]:
    """Stored order (by id), except that each tool result sits right after the nearest earlier assistant
    message that made its call.

    A synthetic result stored by a repair has a later id than the messages after its call; this puts it back.
    Matching by the nearest earlier call (not by id alone) keeps servers that reuse call ids ("call_0" in
    every step) from pairing a result with the wrong call.
    """
    attached: dict[int, list[Message]] = {}  # index of the calling assistant message → its results
    latest_call: dict[str, int] = {}
    stays: list[tuple[int, Message]] = []
    for index, message in enumerate(messages):
        if message.role == "tool" and message.tool_call_id in latest_call:
            attached.setdefault(latest_call[message.tool_call_id], []).append(message)
            continue
        stays.append((index, message))  # results without a call keep their place; repair drops them
        for call in message.tool_calls if message.role == "assistant" else ():
            latest_call[call.id] = index
    ordered: list[Message] = []
    for index, message in stays:
        ordered.append(message)
        ordered.extend(attached.get(index, ()))
    return ordered
