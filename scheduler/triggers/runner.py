"""The daemon's side of triggers: each tick, every agent with triggers gets its due firings submitted to its inbox,
and a loop runs the ticks when something is due.

A tick reads everything it needs in a few queries (the agents, their `trigger_fires` rows, their last activity),
decides with `scheduler.triggers.rules.plan`, submits the due firings with their idempotency keys (500 to a
transaction) and only then records them: a crash in between makes the next tick decide the same firings again,
and the inbox keeps the items already there. Two daemon processes ticking at once do the same, so each firing is
one inbox item.

The loop sleeps until the earliest due time of all agents, never longer than `max_sleep` (so agents created,
messages that start an idle period and edited YAML are noticed within it). Its clock and its sleep are the
daemon's clock and `asyncio.sleep` unless a test passes its own, so trigger tests never sleep for real.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Protocol

import structlog
from sqlalchemy import select

from pagemind.runtime.spec.agent import AgentSpec
from pagemind.runtime.state.records import utcnow
from pagemind.runtime.state.tables.agents import AgentRow
from pagemind.runtime.state.tables.schema import table_of
from pagemind.scheduler.catalog import AgentCatalog
from pagemind.scheduler.errors import DaemonError
from pagemind.scheduler.queue.inbox import Inbox
from pagemind.scheduler.triggers.fires import TriggerFires
from pagemind.scheduler.triggers.rules import Firing, Plan, as_utc, plan, wake_at

log = structlog.get_logger("pagemind.scheduler")
MAX_SLEEP = timedelta(seconds=30)
BATCH = 500  # firings per inbox transaction
_RETRY = timedelta(seconds=5)  # after a tick that failed (the database away, say)
agents = table_of(AgentRow)


class Submitter(Protocol):
    """What the runner needs of the daemon: its catalog, its inbox and the dispatcher to wake."""

    catalog: AgentCatalog
    inbox: Inbox
    dispatcher: Any  # has `wake`, an asyncio.Event
    started: bool  # false once `stop` began: the loop fires nothing more

    @property
    def owner(self) -> str:
        """This daemon process's identity (its own inbox notices are ignored)."""
        ...


@dataclass(frozen=True)
class Target:
    """An agent with triggers: its name, stored id and the spec it runs with now (for an agent made from a
    template, the template's spec: only its triggers are read)."""

    name: str
    agent_id: int
    spec: AgentSpec
    owner: str | None = None  # the end user it belongs to (an API-made agent of a user key)


class TriggerRunner:
    """Ticks the triggers of every agent one daemon serves; `started` is when that daemon process started (by its
    clock): firings due before it were missed while no daemon ran (`scheduler.triggers.rules`)."""

    def __init__(
        self,
        daemon: Submitter,
        started: datetime,
        *,
        max_sleep: timedelta = MAX_SLEEP,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
        turns_per_owner: int = 0,
    ):
        self.daemon, self.started, self.max_sleep = daemon, as_utc(started), max_sleep
        # A user's turns in flight (`DaemonConfig.key_turns_in_flight`; 0: any): a firing of a user's agent past
        # it is skipped, as the API refuses that user's messages with 429, so triggers cannot spend past it either.
        self.turns_per_owner = turns_per_owner
        self.owner_of: dict[int, str] = {}  # agent id → its user, for every agent served that has one
        self.sleep = sleep  # what the loop waits with; a test swaps in one that moves its clock instead
        self.fires = TriggerFires(daemon.catalog.store.engine)
        self.fired_count = 0  # firings this process submitted (one whose item was already there counts too)

    def targets(self) -> list[Target]:
        """Every agent served whose spec has triggers (YAML agents, agents made from a template or a spec)."""
        catalog = self.daemon.catalog
        catalog.folder.rescan()
        with catalog.store.engine.connect() as conn:
            ids = {name: agent_id for agent_id, name in conn.execute(select(agents.c.id, agents.c.name))}
        by_template: dict[str, AgentSpec] = {}  # agents made from one template share its triggers
        found: list[Target] = []
        infos = catalog.list({})
        self.owner_of = {ids[i.name]: i.owner for i in infos if i.owner is not None and i.name in ids}
        for info in infos:
            try:
                spec = by_template.get(info.template) if info.template is not None else None
                if spec is None:
                    spec = catalog.spec_for(info.name)
                    if info.template is not None:
                        by_template[info.template] = spec
                if not (spec.schedule or spec.idle):
                    continue
                agent_id = ids.get(info.name)
                if agent_id is None:  # a YAML agent that never ran: its triggers need its state (and an id)
                    agent_id = catalog.agent_id(info.name)
                found.append(Target(info.name, agent_id, spec, info.owner))
            except DaemonError as exc:  # deleted or its template gone since the listing
                log.warning("trigger_target_skipped", agent=info.name, error=str(exc))
        return found

    async def tick(self, now: datetime) -> datetime:
        """Submit every firing due at `now` and record it; returns when the next tick is due."""
        now = as_utc(now)
        targets = self.targets()
        ids = [t.agent_id for t in targets]
        fired = self.fires.fired(ids)
        activity = self.fires.last_activity(ids, now)
        plans: list[Plan] = []
        recorded: list[tuple[int, str, datetime]] = []
        for target in targets:
            decided = plan(
                target.spec.schedule,
                target.spec.idle,
                fired.get(target.agent_id, {}),
                last_activity=activity.get(target.agent_id),
                now=now,
                started=self.started,
            )
            plans.append(decided)
            recorded += [(target.agent_id, key, at) for key, at in decided.records.items()]
        self.fires.record(recorded)  # first sightings and skipped firings: nothing to submit first
        due = [(target, firing) for target, decided in zip(targets, plans, strict=True) for firing in decided.firings]
        due, over = self.within_quota(due)
        if over:  # dropped as a missed firing is: recorded, never submitted
            self.fires.record([(target.agent_id, f.trigger_key, f.due) for target, f in over])
            for target, firing in over:
                log.warning("trigger_over_quota", agent=target.name, owner=target.owner, trigger=firing.trigger_key)
        for start in range(0, len(due), BATCH):
            batch = due[start : start + BATCH]
            await self.submit(batch)
            # Recorded after the submission: a crash in between re-decides these firings, and their idempotency
            # keys find the items already in the inbox.
            self.fires.record([(target.agent_id, f.trigger_key, f.due) for target, f in batch])
            self.fired_count += len(batch)
            for target, firing in batch:
                log.info(
                    "trigger_fired",
                    agent=target.name,
                    trigger=firing.trigger_key,
                    kind=firing.kind,
                    due=firing.due.isoformat(),
                    missed=firing.missed,
                )
            await asyncio.sleep(0)  # the daemon's other work runs between batches
        return wake_at(plans, now, self.max_sleep)

    def within_quota(
        self, due: list[tuple[Target, Firing]]
    ) -> tuple[list[tuple[Target, Firing]], list[tuple[Target, Firing]]]:
        """(the firings to submit, those skipped): a user's firings go only while the user's open items, over all
        its agents, stay under `turns_per_owner`; agents of nobody (the folder's, an admin's) are not counted."""
        if self.turns_per_owner <= 0 or not any(target.owner is not None for target, _ in due):
            return due, []
        counts = self.daemon.inbox.open_counts()
        used: dict[str, int] = {}
        for agent_id, owner in self.owner_of.items():
            used[owner] = used.get(owner, 0) + counts.get(agent_id, 0)
        kept: list[tuple[Target, Firing]] = []
        over: list[tuple[Target, Firing]] = []
        for target, firing in due:
            user = target.owner
            if user is not None and used.get(user, 0) >= self.turns_per_owner:
                over.append((target, firing))
                continue
            if user is not None:
                used[user] = used.get(user, 0) + 1
            kept.append((target, firing))
        return kept, over

    async def submit(self, batch: list[tuple[Target, Firing]]) -> None:
        """Put a batch of firings in their agents' inboxes, in one transaction (an item whose idempotency key is
        already there stays as it is), and wake the dispatcher."""
        self.daemon.inbox.submit_many(
            [(t.agent_id, f.kind, f.content, f.idempotency_key) for t, f in batch], utcnow(), self.daemon.owner
        )
        self.daemon.dispatcher.wake.set()

    async def run(self, clock: Callable[[], datetime], sleep: Callable[[float], Awaitable[None]] | None = None) -> None:
        """Tick now and whenever the next firing is due, until cancelled or the daemon stops (a daemon draining its
        work before exit takes none from its triggers); a failed tick is logged and retried."""
        sleep = sleep or self.sleep
        while self.daemon.started:
            now = as_utc(clock())
            try:
                wake = await self.tick(now)
            except asyncio.CancelledError:
                raise
            except Exception as exc:
                log.error("trigger_tick_failed", error=f"{type(exc).__name__}: {exc}")
                wake = now + _RETRY
            await sleep(max((wake - as_utc(clock())).total_seconds(), 0.0))
