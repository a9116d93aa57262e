"""The agent's side of the `forget`, `mute_topic` and `unmute_topic` tools (`tools.Forgetting`)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from pagemind.blocks import CoreMemory
from pagemind.runtime.forgetting.forget import ForgettingAgent, finish_deferred, forget_everywhere
from pagemind.runtime.memory.archival.memory import ArchivalService
from pagemind.runtime.memory.recall.memory import RecallService
from pagemind.runtime.memory.topics import FORGET_SIMILARITY, MutedTopics


class AgentForgetting:
    """Forget and mute for one agent's tools: a forget's messages and traces are rewritten when its turn ends
    (`after_turn`, which `Agent.run_turn` calls)."""

    def __init__(self, agent: ForgettingAgent, home: Path | None) -> None:
        self.agent = agent
        self.home = home
        self.queued: list[str] = []

    @property
    def mutes(self) -> MutedTopics | None:
        """The agent's muted topics (None without archival or recall memory of the runtime's)."""
        for part in (self.agent.archival, self.agent.recall):
            if isinstance(part, ArchivalService | RecallService) and part.mutes is not None:
                return part.mutes
        return None

    async def forget(self, query: str, core: CoreMemory) -> str:
        """Forget now what can be (archival memories, core lines in `core`); the rest when the turn ends."""
        report = await forget_everywhere(self.agent, query, self.home, core=core, deferred=True)
        self.queued.append(query)
        return report.summary()

    async def mute(self, topic: str) -> bool:
        """Mute a topic for this agent."""
        mutes = self._mutes()
        return await asyncio.to_thread(mutes.mute, topic)

    async def unmute(self, topic: str) -> bool:
        """Unmute a topic for this agent."""
        mutes = self._mutes()
        return await asyncio.to_thread(mutes.unmute, topic)

    def _mutes(self) -> MutedTopics:
        mutes = self.mutes
        if mutes is None:
            raise ValueError("this agent keeps no memory a topic could be muted in")
        return mutes

    async def after_turn(self) -> None:
        """Finish the turn's forgets: summaries, messages (this turn's too), stored copies and traces."""
        queued, self.queued = self.queued, []
        for query in queued:
            await finish_deferred(self.agent, query, self.home, FORGET_SIMILARITY)
