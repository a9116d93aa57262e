"""The agents loaded in this process: loaded on demand, unloaded when idle, one user at a time each.

A daemon serves far more agents than are ever busy at once (10,000 in one process), so an agent is loaded
(`Agent.load` over the daemon's one `StateStore`) when it has work, kept while it is used, and dropped when it has
been idle for `idle_unload_s` or when more than `max_loaded` are loaded (least recently used first). Its state is
all in the store, so dropping it loses nothing. An agent is reloaded when its spec changed (its YAML or template
was edited): the next turn runs with the new spec, and memory is untouched.

`hold(name)` gives the agent to one user at a time (a turn, a job, an API look at its memory): an asyncio lock
per agent, so the API's reads never see a half-run step of this process.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections import OrderedDict
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from datetime import datetime

import structlog

from pagemind.runtime.agent import Agent
from pagemind.runtime.model.client import ModelClient
from pagemind.runtime.process.settings import Settings
from pagemind.runtime.spec.agent import AgentSpec
from pagemind.scheduler.catalog import AgentCatalog

log = structlog.get_logger("pagemind.scheduler")


@dataclass
class _Loaded:
    agent: Agent
    spec_hash: str
    spec: AgentSpec  # the spec object it was loaded with: the catalog returns the same one until its YAML changes
    used: float  # time.monotonic() of its last release


class AgentPool:
    """Loaded agents by name, with a lock each."""

    def __init__(
        self,
        catalog: AgentCatalog,
        settings: Settings,
        *,
        model: ModelClient | None,
        clock: Callable[[], datetime],
        max_loaded: int,
        idle_unload_s: float,
        hold_steps: bool = True,
    ):
        self.catalog, self.settings, self.model, self.clock = catalog, settings, model, clock
        self.hold_steps = hold_steps  # `DaemonConfig.hold_steps`, given to every agent loaded
        self.max_loaded, self.idle_unload_s = max_loaded, idle_unload_s
        self._loaded: OrderedDict[str, _Loaded] = OrderedDict()
        self._locks: dict[str, asyncio.Lock] = {}
        self.lent: set[str] = set()  # agents lent out by `Daemon.agent` since their last turn: read them again
        # Agents `hold` has just read from the store, for the rest of its block: nothing to read again (`refresh`).
        self.read_now: set[str] = set()

    def __len__(self) -> int:
        return len(self._loaded)

    @contextlib.asynccontextmanager
    async def hold(self, name: str) -> AsyncIterator[Agent]:
        """The agent `name`, loaded with its current spec, for this block alone (others wait their turn)."""
        lock = self._locks.setdefault(name, asyncio.Lock())
        async with lock:
            agent = await self._get(name)
            try:
                yield agent
            finally:
                self.read_now.discard(name)
                entry = self._loaded.get(name)
                if entry is not None:
                    entry.used = time.monotonic()
                    self._loaded.move_to_end(name)

    async def _get(self, name: str) -> Agent:
        spec = self.catalog.spec_for(name)
        entry = self._loaded.get(name)
        if entry is not None and entry.spec is spec:  # unchanged: no fingerprint to compute (a dump and a hash)
            return entry.agent
        spec_hash = spec.spec_hash()
        if entry is not None and entry.spec_hash == spec_hash:
            entry.spec = spec
            return entry.agent
        agent = await Agent.load(
            spec,
            model=self.model,
            settings=self.settings,
            store=self.catalog.store,
            clock=self.clock,
            hold_steps=self.hold_steps,
        )
        if entry is not None:
            entry.agent.monitor.cancel()  # the old instance's flush work ahead would only be thrown away
            if entry.agent.mcp is not None:
                entry.agent.mcp.close_soon()  # its MCP sessions (stdio servers) end with it
            log.info("agent_spec_changed", agent=name, spec_hash=spec_hash)
        self._loaded[name] = _Loaded(agent, spec_hash, spec, time.monotonic())
        self.read_now.add(name)
        self._loaded.move_to_end(name)
        return agent

    def loaded(self, name: str) -> Agent | None:
        """The agent `name` if it is loaded (whoever holds it), without loading it or waiting for it."""
        entry = self._loaded.get(name)
        return entry.agent if entry is not None else None

    def forget(self, name: str) -> None:
        """Drop an agent (it was deleted or renamed, or is being unloaded) and stop its flush work ahead, which
        nothing would use (it was never stored: a later load prepares it again), and its MCP sessions."""
        entry = self._loaded.pop(name, None)
        if entry is not None:
            entry.agent.monitor.cancel()
            if entry.agent.mcp is not None:
                entry.agent.mcp.close_soon()  # its MCP sessions (stdio servers) end with it
        lock = self._locks.get(name)
        if lock is not None and not lock.locked():
            self._locks.pop(name, None)

    def unload_idle(self) -> int:
        """Drop agents idle for `idle_unload_s`, then the least recently used beyond `max_loaded`; an agent in use
        stays. Returns how many were dropped."""
        cutoff, dropped = time.monotonic() - self.idle_unload_s, 0
        for name in list(self._loaded):
            lock = self._locks.get(name)
            if lock is not None and lock.locked():
                continue
            if self._loaded[name].used < cutoff or len(self._loaded) > self.max_loaded:
                self.forget(name)
                dropped += 1
        if dropped:
            log.info("agents_unloaded", dropped=dropped, loaded=len(self._loaded))
        return dropped
