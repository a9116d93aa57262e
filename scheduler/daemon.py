"""The daemon: many agents in one asyncio process, a durable inbox, per-agent order, crash recovery, scale-out.

    catalog = AgentCatalog("agents/", StateStore.open(settings.database_url))
    daemon = Daemon(catalog, settings)
    await daemon.start()
    item = await daemon.submit("companion-u123", "I got the job!", idempotency_key="msg-123")
    done = await daemon.wait(item.run_id, timeout=60)   # done.result["reply"]
    await daemon.stop()

Every accepted message is in the inbox (SQL) before `submit` returns; the dispatcher (`scheduler.dispatcher`)
runs each agent's items oldest first, one at a time, under the agent's lease (`scheduler.queue.leases`), so several
daemon processes on one Postgres keep each agent's order and never run an item twice. The HTTP API
(`scheduler.api.app`) and the triggers (`scheduler.triggers.rules`, through `tick`) are built on this class.
"""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

import structlog

from pagemind.runtime.agent import Agent
from pagemind.runtime.app_calls import open_calls
from pagemind.runtime.messages import Message
from pagemind.runtime.model.client import ModelClient, close_shared_clients
from pagemind.runtime.privacy.policy import AgentPrivacy
from pagemind.runtime.process.settings import Settings
from pagemind.runtime.spec.agent import AgentSpec
from pagemind.runtime.spec.privacy import PrivacyConfig
from pagemind.runtime.state.async_pg import AwaitedStatements
from pagemind.runtime.state.dialects import dialect
from pagemind.runtime.state.held import HeldConnections
from pagemind.runtime.state.records import utcnow
from pagemind.scheduler.catalog import AgentCatalog, AgentInfo
from pagemind.scheduler.daemon_config import DaemonConfig
from pagemind.scheduler.dispatcher import Dispatcher
from pagemind.scheduler.errors import DaemonError, DaemonStopping, KeyReused, NotDeletable, UnknownAgent, UnknownRun
from pagemind.scheduler.message_turn import redacted_app_turn
from pagemind.scheduler.pool import AgentPool
from pagemind.scheduler.queue.inbox import HandOff, Inbox
from pagemind.scheduler.queue.inbox_item import APP_TURN, MESSAGE_KINDS, RUNNING, InboxItem
from pagemind.scheduler.queue.leases import Leases, new_owner_id
from pagemind.scheduler.queue.sql import DONE_CHANNEL, EVENTS_CHANNEL, INBOX_CHANNEL, WATCH_CHANNEL
from pagemind.scheduler.queue.wakeup import PgWakeups, read_arrival
from pagemind.scheduler.streams.fanout import RunFanout
from pagemind.scheduler.streams.relay import RelayStore
from pagemind.scheduler.streams.run_stream import RunStream
from pagemind.scheduler.triggers.runner import TriggerRunner
from pagemind.scheduler.worker_state import Route

if TYPE_CHECKING:
    from pagemind.runtime.erasure.purge import PurgeReport

log = structlog.get_logger("pagemind.scheduler")
KINDS = (*MESSAGE_KINDS, "job")


@dataclass
class UserPurge:
    """What erasing an end user did (`Daemon.purge_user`): each agent purged with its report, the agents kept (of
    the served folder), and how many keys were deleted."""

    user: str
    purged: list[tuple[str, PurgeReport]] = field(default_factory=list)
    kept: list[str] = field(default_factory=list)
    keys: int = 0


class Daemon:
    """Serves the agents of one catalog (see the module docstring)."""

    def __init__(
        self,
        catalog: AgentCatalog,
        settings: Settings,
        *,
        config: DaemonConfig | None = None,
        model: ModelClient | None = None,
        clock: Callable[[], datetime] = utcnow,
    ):
        self.catalog, self.settings, self.config = catalog, settings, config or DaemonConfig()
        self.clock = clock
        self.store = catalog.store
        self.inbox = Inbox(self.store.engine)
        self._privacy: dict[int, tuple[PrivacyConfig, AgentPrivacy]] = {}  # each agent's redaction, by its policy
        self.leases = Leases(self.store.engine, new_owner_id(), self.config.lease_s)
        self.pool = AgentPool(
            catalog,
            settings,
            model=model,
            clock=clock,
            max_loaded=self.config.max_loaded,
            idle_unload_s=self.config.idle_unload_s,
            hold_steps=self.config.hold_steps,
        )
        self.relay = RelayStore(self.store.engine) if RelayStore.supported(self.store.engine) else None
        self.fanout = RunFanout(self.owner, self.relay, interval_s=self.config.relay_interval_s)
        self.dispatcher = Dispatcher(self.inbox, self.leases, self.pool, self.fanout, self.config)
        self.wakeups: PgWakeups | None = None
        self.triggers = TriggerRunner(self, started=clock(), turns_per_owner=self.config.key_turns_in_flight)
        self._tasks: list[asyncio.Task[Any]] = []
        self.started = False
        self.stopped = False  # `stop` gave the unfinished items back: waiting for a run here is over

    @property
    def owner(self) -> str:
        """This process's identity in `agent_leases`, `inbox.owner` and `daemons`."""
        return self.leases.owner

    # -- life -----------------------------------------------------------------------------------------------------

    async def start(self) -> None:
        """Register this process, end dead daemons' leases (their running items run again, completed rather than
        redone), start listening for work and the dispatcher."""
        self.stopped = False
        now = utcnow()
        self.leases.register(self.config.url, now)
        swept = self.leases.sweep(now)
        if dialect(self.store.engine).notices:
            self.wakeups = PgWakeups(
                self.store.engine,
                {
                    INBOX_CHANNEL: self._heard_of_work,
                    DONE_CHANNEL: self.fanout.finished_elsewhere,
                    WATCH_CHANNEL: self.fanout.watched,
                    EVENTS_CHANNEL: self.fanout.heard_events,
                },
                self._listening,
            )
            self._tasks.append(asyncio.create_task(self.wakeups.run(), name="pagemind-listen"))
        self._tasks.append(asyncio.create_task(self.dispatcher.run(), name="pagemind-dispatch"))
        self._tasks.append(asyncio.create_task(self.dispatcher.heartbeat(), name="pagemind-heartbeat"))
        self._tasks.append(asyncio.create_task(self.triggers.run(self.clock), name="pagemind-triggers"))
        self.started = True
        log.info(
            "daemon_started",
            owner=self.owner,
            database=self.store.engine.dialect.name,
            swept=swept,
            concurrency=self.config.concurrency,
        )

    def _listening(self) -> None:
        """The notices are heard (again): catch up on the work and the watches that came meanwhile (a stream reads
        relayed events it was not told of at its poll)."""
        self._heard_of_work("")
        try:
            self.fanout.recheck(self.inbox.watchers)
        except Exception as exc:  # the store is down too: the next reconnect tries again
            log.warning("recheck_failed", error=str(exc)[:200])

    def _heard_of_work(self, payload: str) -> None:
        source, agent_id, name = read_arrival(payload)
        if source == self.owner:  # this process's own submissions woke it already (or went to a busy worker)
            return
        if agent_id is None:
            self.dispatcher.wake.set()
        elif source:  # a daemon that had room took it itself: only a worker lingering here on the agent (holding
            self.dispatcher.poke(agent_id)  # its lease, so the submitter's claim fails) needs to hear of it
        else:  # submitted without a daemon to take it (one without room, another client): take it, no scan
            self.dispatcher.arrived(agent_id, name)

    async def stop(self, grace_s: float | None = None) -> None:
        """Stop taking work; let running items finish for up to `grace_s` (default `config.grace_s`); put the
        unfinished ones back to pending and give every lease back, so another daemon resumes them at once."""
        if not self.started:
            return
        self.started = False
        cancelled = await self.dispatcher.drain(self.config.grace_s if grace_s is None else grace_s)
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        released = self.inbox.release(self.owner)
        self.stopped = True
        self.fanout.end_all()  # every waiter and stream looks again, and finds the daemon stopped
        await self.dispatcher.held.release_all()
        self.leases.unregister()
        HeldConnections.of(self.store.engine).close()
        if (awaited := AwaitedStatements.of(self.store.engine)) is not None:
            awaited.close()
        await close_shared_clients()
        log.info("daemon_stopped", owner=self.owner, cancelled=cancelled, released=released)

    async def tick(self, now: datetime) -> None:
        """Submit every trigger firing due at `now` (`scheduler.triggers.runner`); `start` runs a loop that calls it
        whenever the next firing is due, by the daemon's clock."""
        await self.triggers.tick(now)

    # -- work -----------------------------------------------------------------------------------------------------

    async def submit(
        self, agent: str, content: str, *, idempotency_key: str | None = None, kind: str = "message"
    ) -> InboxItem:
        """Accept a message (or a job, by name) for `agent`: committed to the inbox when this returns. The same
        `idempotency_key` again returns the first item (`KeyReused` if its content differs); `UnknownAgent`."""
        if kind not in KINDS:
            raise DaemonError(f"kind must be one of {', '.join(KINDS)}, not {kind!r}")
        await self.catalog.read_origin(agent)  # awaited: `agent_id` then finds it read
        agent_id = self.catalog.agent_id(agent)
        if kind == "message":  # the inbox is a store too: personal data is replaced before it (`spec.privacy`)
            content = await self._redacted(agent, agent_id, content)
        elif kind == APP_TURN:  # the same for the text and results it carries
            content = await redacted_app_turn(content, lambda text: self._redacted(agent, agent_id, text))
        route = self.dispatcher.route(agent_id) if self.started else Route.ANNOUNCE
        lingering = self.dispatcher.take_lingering(agent_id) if route is Route.HAND_OFF else None
        now, item, new = utcnow(), None, False
        try:
            item, new = await self.inbox.submit(
                agent_id,
                agent,
                kind,
                content,
                idempotency_key,
                now,
                # Every daemon hearing a notice without a source may take the agent (`_heard_of_work`), so that one
                # with room runs it while this one is full; a worker here on the agent holds its lease, so no other
                # daemon could take it: no notice (each wakes every daemon's listener and costs a signal apiece).
                source="" if route is Route.ANNOUNCE else self.owner,
                announce=route in (Route.TAKE_HERE, Route.ANNOUNCE),
                hand_off=self._hand_off(agent, kind, content, now) if lingering is not None else None,
            )
        finally:
            if lingering is not None:  # the item placed with it (None: not claimed for it, so it claims)
                self.dispatcher.hand(lingering, item if new and item is not None and item.state == RUNNING else None)
        if not new and (item.content != content or item.kind != kind):
            raise KeyReused(agent, idempotency_key or "")
        if new and lingering is None:  # this process takes the agent at once, or wakes its worker here
            self.dispatcher.arrived(agent_id, agent)
        return item

    async def _redacted(self, agent: str, agent_id: int, content: str) -> str:
        """`content` as the agent's privacy policy stores it (unchanged under the default, `pii: keep`)."""
        loaded = self.pool.loaded(agent)  # its spec at hand: no catalog read (SQL for an API-made agent) per message
        config = (loaded.spec if loaded is not None else self.catalog.spec_for(agent)).privacy
        if config.pii == "keep":
            return content
        kept = self._privacy.get(agent_id)
        if kept is None or kept[0] != config:
            kept = self._privacy[agent_id] = (config, AgentPrivacy.of(config, self.store.engine, agent_id))
        return await kept[1].text(content)

    def _hand_off(self, agent: str, kind: str, content: str, now: datetime) -> HandOff:
        """The placement of an item with the worker lingering here on `agent`: claimed for it, with the turn's
        user message unless the agent is not loaded here, a failed turn left this very message unanswered (its
        retry reuses it: `runtime.turn_start.begin_turn`), or a paused turn's calls to the app are open (they are
        answered before the next message is stored: `runtime.app_calls`)."""
        loaded = self.pool.loaded(agent) if kind == "message" else None
        message = None
        if loaded is not None and loaded.window.unanswered(content) is None and not open_calls(loaded.window.messages):
            message = Message("user", content, loaded.now(), turn_id=uuid.uuid4().hex)
        return HandOff(self.owner, self.leases.until(now), self.store, message)

    def run(self, run_id: str) -> InboxItem | None:
        """The item with this run id, as stored now (None if there is none)."""
        return self.inbox.get(run_id)

    async def wait(self, run_id: str, timeout: float, *, known: InboxItem | None = None) -> InboxItem:
        """The item once done or failed, or as it stands after `timeout` seconds; `UnknownRun`, and `DaemonStopping`
        when the daemon stopped first (the item is pending again). `known`: the item as the caller just got it (from
        `submit`, with no await between): its first read is skipped."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            finished = self.fanout.waiter(run_id)  # before reading: an end in between is not missed
            try:
                item, known = known or await self.inbox.read(run_id), None
                if item is None:
                    raise UnknownRun(run_id)
                remaining = deadline - loop.time()
                if item.finished or remaining <= 0:
                    return item
                if self.stopped:  # its unfinished items are pending again: no run ends here
                    raise DaemonStopping(run_id)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(finished.wait(), min(remaining, self.config.poll_s))
                if finished.item is not None:  # it ended here: the item as its finish stored it, no read
                    return finished.item
                if self.stopped:  # woken by the stop: its connections are closed, nothing to read
                    raise DaemonStopping(run_id)
            finally:
                self.fanout.unwait(run_id, finished)

    def events(self, run_id: str, after: int = 0) -> RunStream:
        """The run's events (`runtime.events`) as they happen, from its first (or after seq `after`: the stream's
        `last_seq`), each once and in order, ending when the run ends; wherever the run runs: on Postgres a run
        that another daemon process runs is relayed (`scheduler.streams.relay`). The events so far come first, so a
        stream that starts late misses none (model request and response events that happened before it started come
        without their bodies, as relayed ones do); of a run over before the stream started it has what was relayed
        (nothing, unless another process watched it)."""
        return RunStream(self.fanout, self.inbox, run_id, owner=self.owner, poll_s=self.config.poll_s, after=after)

    # -- agents ---------------------------------------------------------------------------------------------------

    def create_agent(
        self,
        name: str,
        *,
        template: str | None = None,
        spec: AgentSpec | None = None,
        blocks: dict[str, str] | None = None,
        owner: str | None = None,
    ) -> AgentInfo:
        """Make an agent from a template (by name) or a spec, belonging to `owner` (an end user; None: nobody's);
        `AgentExists`, `UnknownTemplate`."""
        return self.catalog.create(name, utcnow(), template=template, spec=spec, blocks=blocks, owner=owner)

    def delete_agent(self, name: str) -> None:
        """Stop serving an agent made through the daemon; its open items fail. `UnknownAgent`, `NotDeletable`."""
        agent_id = self.catalog.delete(name)
        self.inbox.fail_open(agent_id, f"agent '{name}' was deleted", utcnow())
        self.pool.forget(name)

    async def purge_agent(self, name: str) -> PurgeReport:
        """Erase an agent made through the daemon from every store (`runtime.erasure`), with its turns held off
        while it is recorded; its open items fail. `UnknownAgent`, `NotDeletable`; `StoreError` when a vector
        store cannot be reached (nothing erased then)."""
        from pagemind.runtime.erasure.purge import finish, record_purges

        agent_id, engine = self.catalog.deletable_id(name), self.catalog.store.engine
        async with self.agent(name):
            await asyncio.to_thread(record_purges, engine, self.settings, [(agent_id, name)])
            self.catalog.forget(name)  # from the record on it is no one's: not even from this process's cache
        self.pool.forget(name)
        [report] = await asyncio.to_thread(finish, engine, self.settings, [agent_id])
        return report

    async def purge_user(self, user: str) -> UserPurge:
        """Erase an end user: every agent made for them through the daemon (`purge_agent`, one after another), then
        their keys (revoke them first: `KeyStore.revoke_user`). Agents of the served folder given to them are kept
        (only their files remove them) and named. Each part is idempotent: a purge cut short is done by calling
        this again, and what was recorded of an agent's purge is finished at the next start anyway."""
        from pagemind.runtime.state.keys import KeyStore

        keys = KeyStore(self.catalog.store.engine)
        done = UserPurge(user)
        for name in sorted(await asyncio.to_thread(keys.owned_names, user)):
            try:
                done.purged.append((name, await self.purge_agent(name)))
            except NotDeletable:
                done.kept.append(name)
            except UnknownAgent:  # being purged already (a purge cut short): its record finishes it
                continue
        done.keys = await asyncio.to_thread(keys.delete_user, user)
        return done

    def list_agents(self) -> list[AgentInfo]:
        """Every agent served, with its open items."""
        return self.catalog.list(self.inbox.open_counts())

    def agent_info(self, name: str) -> AgentInfo:
        """One agent served, with its open items; `UnknownAgent`."""
        return self.catalog.info(name, self.inbox.open_count)

    def agent(self, name: str) -> contextlib.AbstractAsyncContextManager[Agent]:
        """The loaded agent, fresh from the store, with its turns held off meanwhile (in this process and, by the
        turn lock, in others); `UnknownAgent`."""
        return self._agent(name)

    @contextlib.asynccontextmanager
    async def _agent(self, name: str) -> AsyncIterator[Agent]:
        async with self.pool.hold(name) as agent:
            try:
                if self.dispatcher.held.holds(agent.record.id):  # this process works on it: `hold` is enough
                    await agent.refresh()
                    yield agent
                    return
                async with agent.store.turn_lock(agent.record.id, self.config.turn_wait_s, name):
                    await agent.refresh()
                    yield agent
            finally:
                self.pool.lent.add(name)  # the caller may have written through the store: the next turn re-reads
