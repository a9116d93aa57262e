"""Running the inbox: take agents with work, run each agent's items in order, one at a time.

The dispatcher wakes on a submission in this process, a Postgres notice from another, a worker ending, or every
`poll_s` (the safety net). A submission or a notice names its agent (`arrived`): that agent is taken at once with
its oldest item, lease and claim in one commit (`scheduler.queue.arrivals`). Anything else makes it scan the inbox and
take the leases of as many agents with work as there are free slots (`concurrency`). Each taken agent gets a
worker task that claims its oldest open item, runs it (a message as a turn with the idempotency key
`inbox:<run id>`, a job through `scheduler.jobs`), marks it done or failed, and goes on until the agent's inbox is
empty; then it lingers `linger_s` (the user's next message usually follows the reply: an arrival for the agent
wakes it and it claims the item, with no lease or lock to take again) and gives the lease back. A message that
arrives while its agent is busy
waits its turn: items are never batched into one turn. A heartbeat renews the leases of agents being worked on.
A run's events go to the fanout (`scheduler.streams.fanout`), which relays them when a daemon elsewhere watches the run:
what is left of them, and the end row, is written before the item is marked finished.

Exactly once: the turn's idempotency key makes a re-run of an item whose daemon died after the turn committed
return the stored turn, and a re-run of one killed mid-turn resume after its last committed step
(`runtime.turn_start.begin_turn`); the item is then marked done once (`Inbox.finish` only moves an open item).
"""

from __future__ import annotations

import asyncio
import time
from datetime import timedelta
from typing import Any

import structlog

from pagemind.runtime.observer import observing
from pagemind.runtime.process.crashpoints import crash_point
from pagemind.runtime.state.records import utcnow
from pagemind.scheduler.errors import UnknownAgent
from pagemind.scheduler.jobs import run_job
from pagemind.scheduler.message_turn import run_message
from pagemind.scheduler.pool import AgentPool
from pagemind.scheduler.queue.arrivals import Arrivals
from pagemind.scheduler.queue.inbox import Inbox
from pagemind.scheduler.queue.inbox_item import MESSAGE_KINDS, InboxItem
from pagemind.scheduler.queue.leases import Leases
from pagemind.scheduler.queue.turnlocks import HeldAgents
from pagemind.scheduler.streams.fanout import RunFanout
from pagemind.scheduler.triggers.rules import fired_by_idle
from pagemind.scheduler.worker_state import Linger, Route, Wake, Worker, WorkerState

log = structlog.get_logger("pagemind.scheduler")


class Dispatcher:
    """The workers of one daemon process (see the module docstring)."""

    def __init__(self, inbox: Inbox, leases: Leases, pool: AgentPool, fanout: RunFanout, config: Any):
        self.inbox, self.leases, self.pool, self.fanout, self.config = inbox, leases, pool, fanout, config
        self.held = HeldAgents(pool.catalog.store)
        self.arrivals = Arrivals(inbox.engine, leases)
        self.wake = Wake()
        self._arrived: dict[int, str | None] = {}  # agents named by arrivals since the last look, in order
        self.stopping = False
        self.workers: dict[int, Worker] = {}
        self._busy: dict[int, float] = {}  # agents a turn outside the daemon holds (no worker), and when to look again
        self._slot_freed = asyncio.Event()

    def _in_state(self, state: WorkerState) -> list[int]:
        return [agent_id for agent_id, worker in self.workers.items() if worker.state is state]

    def _active(self) -> int:
        """Workers holding a slot: running items (not lingering, nor waiting for a slot)."""
        return len(self._in_state(WorkerState.RUNNING))

    def _start_worker(self, agent_id: int, first: InboxItem | None = None) -> None:
        self.workers[agent_id] = Worker(asyncio.create_task(self._work(agent_id, first), name=f"agent-{agent_id}"))

    async def _take_slot(self, worker: Worker) -> None:
        """A worker woken from its linger runs within `concurrency` like any other: up to `max_lingering` linger, so
        their wake-ups may outnumber the slots; the rest wait for one (a worker lingering or ending frees one)."""
        try:
            while not self.stopping and self._active() >= self.config.concurrency:
                self._slot_freed.clear()
                await self._slot_freed.wait()
        finally:
            worker.state = WorkerState.RUNNING

    async def run(self) -> None:
        """Take agents with work until `stopping`: first those named by an arrival (`arrived`), then, when woken
        for any other reason or by the poll, whatever the inbox's heads show."""
        while not self.stopping:
            self.wake.clear()
            try:
                more = await self._dispatch()
            except Exception:  # the store failed: log it and look again at the next wake-up or poll, never die
                log.exception("dispatch_failed")
                self.wake.scan, more = True, False
            if more:
                continue
            try:
                await asyncio.wait_for(self.wake.wait(), self.config.poll_s)
            except TimeoutError:
                self.wake.scan = True

    async def _dispatch(self) -> bool:
        """One look: take the arrivals, then (when asked to scan) the agents the inbox's heads show, as many as
        there are free slots. Returns whether every slot was filled (there may be more)."""
        scan, self.wake.scan = self.wake.scan, False
        arrived, self._arrived = self._arrived, {}
        now = time.monotonic()
        self._busy = {agent_id: until for agent_id, until in self._busy.items() if until > now}
        if arrived:
            await self._take_arrived(arrived)
        lingering = self._in_state(WorkerState.LINGERING)
        if scan and lingering:  # work for them that no arrival named (a batch of trigger firings)
            for agent_id in self.inbox.with_open(sorted(lingering)):
                self.poke(agent_id)
        free = self.config.concurrency - self._active()
        if not scan or free <= 0:
            return False
        taken = self.leases.claim_agents(free, set(self.workers) | set(self._busy), utcnow())
        crash_point("daemon.agents_leased")
        for agent_id in taken:
            self._start_worker(agent_id)
        if taken and len(taken) == free:
            self.wake.scan = True
            return True
        return False

    def arrived(self, agent_id: int, name: str | None = None) -> None:
        """Work for this agent was just committed (submitted in this process, or a notice from another named it):
        take the agent and its oldest item at once (`scheduler.queue.arrivals`), without scanning the inbox. A worker
        already on the agent claims the item next anyway; an agent that cannot be taken now is left to the scan."""
        if agent_id in self.workers:
            self.poke(agent_id)  # a lingering worker claims it at once; a busy one claims it next anyway
            return
        self._arrived.setdefault(agent_id, name)
        self.wake.arrival()

    def holds(self, agent_id: int) -> bool:
        """Whether a worker here is on the agent, its lease not known to be taken over (running or lingering)."""
        worker = self.workers.get(agent_id)
        return worker is not None and not worker.lost

    def route(self, agent_id: int) -> Route:
        """Where a submission for the agent goes now (see `Route`)."""
        worker = self.workers.get(agent_id)
        if worker is not None and not worker.lost:
            lingering = worker.state is WorkerState.LINGERING and worker.linger is not None and self.config.hand_off
            return Route.HAND_OFF if lingering else Route.HELD_HERE
        return Route.TAKE_HERE if self.can_take(agent_id) else Route.ANNOUNCE

    def can_take(self, agent_id: int) -> bool:
        """Whether an arrival for the agent would be taken here now: a worker of ours is on it, or a slot is free."""
        if agent_id in self.workers:
            return True
        queued = sum(1 for queued_id in self._arrived if queued_id not in self.workers)  # arrivals not yet taken
        return not self.stopping and agent_id not in self._busy and self._active() + queued < self.config.concurrency

    async def _take_arrived(self, arrived: dict[int, str | None]) -> None:
        for agent_id, name in arrived.items():
            if self.config.concurrency - self._active() <= 0:
                self.wake.scan = True  # no slot: the scan after a worker ends finds it
                return
            if agent_id in self.workers or agent_id in self._busy:
                self.poke(agent_id)
                continue
            try:
                if not await self.held.take(agent_id):  # a CLI turn, or a daemon about to run it: left to them
                    continue
                name = name or self.pool.catalog.name_of(agent_id)
                item = await self.arrivals.claim(agent_id, name, utcnow())
            except Exception as exc:  # the store failed: the scan (at the poll) tries again
                log.warning("arrival_claim_failed", agent_id=agent_id, error=str(exc)[:200])
                item = None
                self.wake.scan = True
            if item is None:  # nothing open (a stale notice), or another daemon holds the lease
                await self.held.release(agent_id)
                continue
            self._start_worker(agent_id, item)

    def poke(self, agent_id: int) -> None:
        """Wake the agent's worker if it lingers (it claims the new item at once); if it is busy, have it claim
        again after its item instead of lingering: the finish's `more` can predate a submission that committed
        while that statement ran."""
        worker = self.workers.get(agent_id)
        if worker is None:
            return
        if worker.state is not WorkerState.LINGERING or worker.linger is None:
            worker.poked = True
            return
        worker.state = WorkerState.WAITING_FOR_SLOT  # woken, and holding no slot until it takes one
        worker.linger.set()

    def take_lingering(self, agent_id: int) -> Linger | None:
        """The agent's lingering worker, kept from ending its linger, for a submission that places its item with it
        (`Route.HAND_OFF`); `hand` must follow. None if no worker lingers on it."""
        worker = self.workers.get(agent_id)
        if worker is None or worker.state is not WorkerState.LINGERING or worker.linger is None:
            return None
        worker.state = WorkerState.WAITING_FOR_SLOT  # woken, and holding no slot until it takes one
        worker.linger.taken = True
        return worker.linger

    def hand(self, event: Linger, item: InboxItem | None) -> None:
        """Give a worker taken by `take_lingering` the item claimed for it (None: it claims the next one itself)."""
        event.item = item
        event.set()

    async def _linger(self, worker: Worker) -> Linger | None:
        """Keep an agent whose inbox is empty (its lease, its turn lock, its loaded state) for `linger_s`, and
        say whether work came for it meanwhile. A user's next message usually comes right after the reply: a worker
        that kept the agent claims it at once, instead of giving the lease and lock back and taking them again (six
        statements, two of them commits) and reading the agent's state again. Lingering workers hold no slot of
        `concurrency` (woken, they take one: `_take_slot`), and at most `max_lingering` of them linger at once.
        Returns its wake-up (None: the linger ended with no work, or the daemon stops)."""
        lingering = len(self._in_state(WorkerState.LINGERING))
        if self.config.linger_s <= 0 or self.stopping or lingering >= self.config.max_lingering:
            return None
        event = worker.linger = Linger()
        worker.state = WorkerState.LINGERING
        self._slot_freed.set()
        if self.wake.scan:  # work left waiting for a slot (an arrival deferred): this worker's slot is free now
            self.wake.set()
        try:
            await self._linger_wait(event)
        except TimeoutError:
            if not (event.taken or event.is_set()):
                return None
            await event.wait()  # a submission is placing an item with this worker: it hands it over next
        finally:
            worker.linger = None
            if worker.state is WorkerState.LINGERING:  # not woken: it gives the agent back, holding its slot
                worker.state = WorkerState.RUNNING
        if self.stopping:  # a handed item is given back with every other at the stop (`Inbox.release`)
            worker.state = WorkerState.RUNNING
            return None
        return event

    async def _linger_wait(self, event: Linger) -> None:
        """Wait for the wake-up; TimeoutError after `linger_s`."""
        await asyncio.wait_for(event.wait(), self.config.linger_s)

    async def _work(self, agent_id: int, first: InboxItem | None = None) -> None:
        """Run the agent's items until its inbox is empty; `first`: an item claimed already, with the agent's lease
        and turn lock (`_take_arrived`)."""
        worker = self.workers[agent_id]
        fresh = False  # read the agent again after taking its lock: another process may have run it meanwhile
        failed = False
        try:
            if first is None and not await self.held.take(agent_id):  # a turn outside the daemon: later
                log.info("agent_busy_elsewhere", agent_id=agent_id)
                self._busy[agent_id] = time.monotonic() + self.config.poll_s
                self.leases.release(agent_id)
                return
            more = True  # whether a claim may find an item (the last finish says when there is none)
            item: InboxItem | None
            while not self.stopping and not worker.lost:
                if first is not None:
                    item, first = first, None
                elif more or worker.poked:
                    worker.poked = False  # this claim finds what the poke announced
                    now = utcnow()
                    item = await self.inbox.claim_next(agent_id, self.leases.owner, self.leases.until(now), now)
                else:  # the last finish said nothing else waits: no empty claim (claim again after a linger)
                    item, more = None, True
                if item is None:
                    woken = await self._linger(worker)
                    if woken is not None:
                        await self._take_slot(worker)
                        first = woken.item  # placed with it, claimed for it by the submission; None: claim it
                        continue
                    await self.held.release(agent_id)
                    # An item submitted between the empty claim and the release found this agent leased: look again.
                    has_open = await self.leases.release_looking(agent_id)
                    crash_point("daemon.lease_released")
                    if has_open and self.leases.take(agent_id, utcnow()):
                        if await self.held.take(agent_id):
                            fresh = False
                            continue
                        # The lock's holder (an arrival in another daemon, a CLI turn) runs it: the lease is its.
                        self.leases.release(agent_id)
                        self.wake.set()
                    return
                crash_point("daemon.item_claimed")
                more = await self._run(item, refresh=not fresh) is not False
                fresh = True
        except Exception:  # the database failed under us: the lease runs out and the agent is taken over
            log.exception("worker_failed", agent_id=agent_id)
            failed = True
        finally:
            await self.held.release(agent_id)
            self.workers.pop(agent_id, None)
            self._slot_freed.set()
            # Only a freed slot can start work the loop left waiting (a full house, or an arrival deferred for want
            # of a slot: `wake.scan`); otherwise newer work wakes the loop itself, or this worker found it.
            if failed or self.wake.scan or self._active() + 1 >= self.config.concurrency or self.stopping:
                self.wake.set()

    async def _run(self, item: InboxItem, refresh: bool) -> bool | None:
        """Run one claimed item and record its outcome; returns `InboxItem.more` of the finish (None: unknown)."""
        self.fanout.begin(item.run_id, item.attempts, item.watcher)  # in the claim's synchronous stretch
        try:
            if item.attempts > self.config.max_attempts:
                return await self._finish(
                    item,
                    None,
                    f"gave up after {item.attempts - 1} attempts: the daemon stopped while running it each time",
                )
            log.info("item_start", agent=item.agent_name, run_id=item.run_id, kind=item.kind, attempt=item.attempts)
            finished = None
            try:
                result, error, finished = await self._execute(item, refresh)
            except UnknownAgent as exc:
                result, error = None, str(exc)
            except Exception as exc:  # the turn failed (the model, a deadline): the item fails with the error
                log.warning("item_failed", agent=item.agent_name, run_id=item.run_id, error=str(exc)[:300])
                result, error = None, f"{type(exc).__name__}: {exc}"
            crash_point("daemon.turn_done")
            return await self._finish(item, result, error, finished)
        finally:
            self.fanout.forget(item.run_id)  # given back unfinished (a stop, a failing store): the next attempt relays

    async def _execute(
        self, item: InboxItem, refresh: bool
    ) -> tuple[dict[str, Any] | None, str | None, InboxItem | None]:
        """Run the item with the agent's turn lock held (`self.held`, taken with the lease): (its result, its error,
        the item as finished when its finish committed with the turn's last step, else None). The first item after
        taking the lock reads again whatever another process changed since this one last looked; later ones need
        not (no one else can run the agent meanwhile), unless this process lent the agent out (`Daemon.agent`)."""
        async with self.pool.hold(item.agent_name) as agent:
            with observing(self.fanout.observer(item.run_id)):
                lent = item.agent_name in self.pool.lent
                if lent or (refresh and item.agent_name not in self.pool.read_now):  # just loaded: fresh already
                    self.pool.lent.discard(item.agent_name)
                    await agent.refresh()
                if item.kind in MESSAGE_KINDS:
                    owner, with_last_step = self.leases.owner, self.config.finish_with_last_step
                    result, finished = await run_message(agent, item, self.inbox, self.fanout, owner, with_last_step)
                    return result, None, finished
                result = await run_job(agent, item.content, ends_session=fired_by_idle(item))
                return result, result.get("error"), None

    async def _finish(
        self, item: InboxItem, result: dict[str, Any] | None, error: str | None, stored: InboxItem | None = None
    ) -> bool | None:
        """Mark the item finished, unless it was already (`stored`: its finish committed with the turn's last
        step); end the run's streams and waiters; return `InboxItem.more`."""
        self.fanout.settle(item.run_id, last=True)  # every relayed event is written before the end is
        if stored is None:
            stored = await self.inbox.finish(item, self.leases.owner, utcnow(), result=result, error=error)
        crash_point("daemon.item_finished")
        log.info(
            "item_end",
            agent=item.agent_name,
            run_id=item.run_id,
            state=stored.state,
            latency_ms=round((stored.finished_at - stored.created_at).total_seconds() * 1000, 1)
            if stored.finished_at
            else None,
        )
        self.fanout.finish(item.run_id, stored.watcher, stored)
        return stored.more

    async def heartbeat(self) -> None:
        """Renew this process's leases, say it is alive, end dead daemons' leases, look for watches of its runs
        whose notice was missed, unload idle agents, delete relayed events past `events_keep_s`; forever."""
        while True:
            await asyncio.sleep(self.config.lease_s / 3)
            now = utcnow()
            try:
                for lost in self.leases.renew(set(self.workers), now):
                    if (worker := self.workers.get(lost)) is not None:
                        worker.lost = True
                self.leases.heartbeat(now)
                if self.leases.sweep(now):
                    self.wake.set()
                self.fanout.recheck(self.inbox.watchers)  # a watch whose notice was missed (LISTEN was down)
            except Exception:
                log.exception("heartbeat_failed")
            self.pool.unload_idle()
            self.fanout.prune(now - timedelta(seconds=self.config.events_keep_s))

    async def drain(self, grace_s: float) -> int:
        """Stop taking work; let running items finish for up to `grace_s`, then cancel them. Returns how many were
        cancelled (their items go back to pending when the daemon gives its leases back)."""
        self.stopping = True
        self.wake.set()
        self._slot_freed.set()
        for worker in self.workers.values():
            if worker.linger is not None:
                worker.linger.set()
        running = [worker.task for worker in self.workers.values()]
        if not running:
            return 0
        _, late = await asyncio.wait(running, timeout=grace_s)
        for task in late:
            task.cancel()
        await asyncio.gather(*late, return_exceptions=True)
        return len(late)
