"""The Python facade: load an agent from YAML, send it messages, look at its memory.

    agent = await Agent.load("agents/companion.yaml")
    reply = await agent.send("Hi, I'm Lin.")
    agent.memory.blocks

Tests swap the model with `Agent.load(..., model=ScriptedModel(...))`; nothing is monkeypatched.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Callable

import structlog

from pagemind.blocks import BlockEdit, CoreMemory
from pagemind.runtime.compiler import CompiledContext, ContextInputs, MemoryStats, compile_context
from pagemind.runtime.messages import Message
from pagemind.runtime.pressure.history_repair import context_order
from pagemind.runtime.loop import run_turn
from pagemind.runtime.model_client import ContextLengthExceeded, ModelClient, ModelRequest, ModelResponse, OpenAIModelClient
from pagemind.runtime.observer import NullObserver, TurnObserver
from pagemind.runtime.budget import usable_window
from pagemind.runtime.pressure.monitor import relieve_pressure, track_usage
from pagemind.runtime.settings import Settings
from pagemind.runtime.spec import AgentSpec, load_spec
from pagemind.runtime.state.store import AgentRecord, StateStore, StepRecord, utcnow
from pagemind.runtime.tokens import DEFAULT_ENCODING, count_tokens
from pagemind.tools import ArchivalMemory, RecallMemory, Tool

log = structlog.get_logger("pagemind.agent")


@dataclass
class StepContext:
    """What tools see during one step (implements `tools.ToolContext`)."""

    agent_name: str
    core_memory: CoreMemory
    clock: Callable[[], datetime]
    archival: ArchivalMemory | None = None
    recall: RecallMemory | None = None

    def now(self) -> datetime:
        """The agent's clock."""
        return self.clock()


@dataclass(frozen=True)
class CommittedStep:
    """What a step stored."""

    step_id: int
    messages: list[Message]
    edits: list[BlockEdit]


@dataclass
class Agent:
    """One agent's live state: its spec, core memory and window, backed by the state store."""

    spec: AgentSpec
    record: AgentRecord
    store: StateStore
    memory: CoreMemory
    context_messages: list[Message]
    recall_count: int
    tools: dict[str, Tool]
    model_override: ModelClient | None = None
    clock: Callable[[], datetime] = utcnow
    observer: TurnObserver = field(default_factory=NullObserver)
    archival: ArchivalMemory | None = None
    recall: RecallMemory | None = None
    retrieved: tuple[str, ...] = ()  # archival memories fetched for the current turn, best first
    _model: ModelClient | None = None

    @classmethod
    async def load(
        cls,
        path: str | Path | AgentSpec,
        *,
        model: ModelClient | None = None,
        settings: Settings | None = None,
        store: StateStore | None = None,
        reset_memory: bool = False,
        clock: Callable[[], datetime] = utcnow,
    ) -> "Agent":
        """Load the agent defined by a YAML file (or a spec), creating its stored state on first use.

        `model` replaces the configured endpoint (tests, replays); `store` shares an open database.
        """
        from pagemind.runtime.memory.wiring import build_external_memory

        spec = path if isinstance(path, AgentSpec) else load_spec(path)
        settings = settings or Settings.from_env()
        store = store or StateStore.open(settings.database_url)
        record = store.ensure_agent(spec, reset_memory=reset_memory)
        archival, recall = build_external_memory(spec, record, store, settings, clock)
        return cls(
            spec=spec, record=record, store=store, memory=CoreMemory(store.load_blocks(record.id, spec)),
            context_messages=context_order(store.in_context_messages(record.id)), recall_count=store.message_count(record.id),
            tools=spec.resolved_tools(), model_override=model, clock=clock, archival=archival, recall=recall,
        )

    @property
    def name(self) -> str:
        """The agent's name."""
        return self.spec.name

    @property
    def model(self) -> ModelClient:
        """The model client: the override, or the configured endpoint (raises NoModelConfigured if none)."""
        if self.model_override is not None:
            return self.model_override
        if self._model is None:
            self._model = OpenAIModelClient.from_spec(self.spec.model)
        return self._model

    async def send(self, text: str) -> str | None:
        """Run one turn with a user message; returns the agent's reply (None if it never sent one)."""
        return (await run_turn(self, text)).reply

    def compile(self) -> CompiledContext:
        """The prompt the model would see now."""
        archival_count, archival_tags = self.archival.stats() if self.archival else (None, ())
        stats = MemoryStats(self.clock(), self.recall_count, len(self.context_messages), archival_count, archival_tags)
        inputs = ContextInputs(
            system=self.spec.system, blocks=tuple(self.memory.blocks), messages=tuple(self.context_messages),
            stats=stats, tools=tuple(t.openai_schema() for t in self.tools.values()),
            summary=self.record.summary, encoding=self.spec.model.encoding or DEFAULT_ENCODING,
            max_message_tokens=usable_window(self.spec) // 4, retrieved=self.retrieved,
        )
        return compile_context(inputs)

    async def prefetch(self, user_message: str) -> None:
        """Fetch the archival memories most relevant to this turn into the prompt, within the retrieved budget.

        The ranking's noise floor means an unrelated message fetches nothing.
        """
        top_k = self.spec.memory.prefetch_top_k
        if self.archival is None or top_k == 0 or not user_message.strip():
            self.retrieved = ()
            return
        hits = await self.archival.search(user_message, top_k=top_k, count_hits=False)
        budget = min(self.spec.memory.budgets.retrieved, usable_window(self.spec) // 8)
        lines, used = [], 0
        for hit in hits:
            line = f"[{hit.date:%Y-%m-%d}] ({hit.kind}) {hit.text}"
            used += count_tokens(line, self.spec.model.encoding or DEFAULT_ENCODING) + 2
            if used > budget:
                break
            lines.append(line)
        self.retrieved = tuple(lines)

    def step_request(self, context: CompiledContext) -> ModelRequest:
        """The request for an agent step with this compiled context."""
        model = self.spec.model
        return ModelRequest(model.name, context.messages, context.tools, model.temperature, model.max_output_tokens)

    async def think(self, step: int) -> ModelResponse:
        """Relieve memory pressure, compile the context and get the model's next move for this step.

        A provider's context_length_exceeded forces a flush and one retry.
        """
        for attempt in (1, 2):
            compiled = await relieve_pressure(self, step, force=attempt == 2)
            try:
                response = await self.call_model(self.step_request(compiled), step)
            except ContextLengthExceeded:
                if attempt == 2:
                    raise
                log.warning("context_length_exceeded", agent=self.name, estimated=compiled.total_tokens)
                continue
            track_usage(self, compiled, response)
            return response
        raise AssertionError("unreachable")

    async def call_model(self, request: ModelRequest, step: int) -> ModelResponse:
        """Every model call (steps, summaries, extraction) goes through here, so observers see them all."""
        self.observer.model_request(step, request)
        response = await self.model.complete(request)
        self.observer.model_response(step, response)
        return response

    def tool_context(self, working: CoreMemory) -> StepContext:
        """The context tools get for a step that edits `working`."""
        return StepContext(self.name, working, self.clock, self.archival, self.recall)

    def accept(self, message: Message) -> list[Message]:
        """Store an incoming message durably before anything else runs (the inbox)."""
        stored = self.store.append_messages(self.record.id, [message])
        self.context_messages += stored
        self.recall_count += len(stored)
        return stored

    def commit_step(self, record: StepRecord, messages: list[Message], working: CoreMemory) -> CommittedStep:
        """Write the step atomically, then adopt its messages and edits in memory."""
        edits = list(working.pending)
        step_id, stored = self.store.commit_step(self.record.id, record, messages, edits)
        working.clear_pending()
        self.memory = working
        self.context_messages += stored
        self.recall_count += len(stored)
        return CommittedStep(step_id, stored, edits)
