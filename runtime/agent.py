"""The Python facade: load an agent from YAML, send it messages, look at its memory.

    agent = await Agent.load("agents/companion.yaml")
    reply = await agent.send("Hi, I'm Lin.")
    agent.memory.blocks

Tests swap the model with `Agent.load(..., model=ScriptedModel(...))`; nothing is monkeypatched.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from pagemind.blocks import CoreMemory
from pagemind.runtime.budget import max_message_tokens, max_reply_tokens, usable_window
from pagemind.runtime.compiler import CompiledContext, ContextInputs, MemoryStats, compile_context
from pagemind.runtime.crypto.keys import Encryption
from pagemind.runtime.events import Event, ModelRequestEvent, ModelResponseEvent, Salience
from pagemind.runtime.forgetting.requests import AgentForgetting
from pagemind.runtime.loop import run_turn
from pagemind.runtime.mcp.toolset import McpToolset
from pagemind.runtime.memory.archival.memory import ArchivalService
from pagemind.runtime.memory.lifecycle.salience import PREFETCH_STEP, extraction_gate, lookup_gate
from pagemind.runtime.memory.reads import LiveReads, ReadTape
from pagemind.runtime.memory.recall.memory import RecallService
from pagemind.runtime.memory.review import ReviewQueue
from pagemind.runtime.memory.wiring import build_external_memory
from pagemind.runtime.messages import Message
from pagemind.runtime.model.client import (
    ModelClient,
    ModelRequest,
    ModelResponse,
    OpenAIModelClient,
    StreamingModelClient,
)
from pagemind.runtime.observer import HeardClock, NullObserver, TurnObserver, listener, wants_deltas
from pagemind.runtime.pressure.monitor import PressureMonitor
from pagemind.runtime.pressure.summarizer import summarize
from pagemind.runtime.privacy.policy import AgentPrivacy
from pagemind.runtime.process.crashpoints import crash_point
from pagemind.runtime.process.settings import Settings
from pagemind.runtime.reply_stream import ReplyStream
from pagemind.runtime.spec.agent import AgentSpec
from pagemind.runtime.spec.loading import load_spec
from pagemind.runtime.state.records import AgentRecord, utcnow
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.tokens import DEFAULT_ENCODING, count_tokens
from pagemind.runtime.turn_outcomes import TurnResult
from pagemind.runtime.window import Window
from pagemind.tools import ArchivalMemory, Forgetting, RecallMemory, Tool

DEFAULT_WAIT = 30.0  # seconds a turn waits for another turn of the same agent before `AgentBusy`


@dataclass
class StepContext:
    """What tools see during one step (implements `tools.ToolContext`)."""

    agent_name: str
    core_memory: CoreMemory
    clock: Callable[[], datetime]
    archival: ArchivalMemory | None = None
    recall: RecallMemory | None = None
    forgetting: Forgetting | None = None  # the forget and mute tools' way in (`runtime.forgetting`)
    review: ReviewQueue | None = None  # memories held for a person's review (`memory.review`)
    tool_call_id: str | None = None  # set per call by dispatch (`for_call`): a side effect's idempotency key

    def for_call(self, call_id: str) -> StepContext:
        """This context for one tool call."""
        return dataclasses.replace(self, tool_call_id=call_id)

    def now(self) -> datetime:
        """The agent's clock."""
        crash_point("tool.clock")  # a tool reading the clock is in the middle of dispatch
        return self.clock()


@dataclass
class Agent:
    """One agent: its spec, core memory, window, tools and model, backed by the state store.

    The window owns the in-context state; the pressure monitor is the policy over it; `runtime.loop` runs turns.
    """

    spec: AgentSpec
    record: AgentRecord
    store: StateStore
    memory: CoreMemory
    window: Window
    tools: dict[str, Tool]
    model_override: ModelClient | None = None
    clock: Callable[[], datetime] = utcnow
    observer: TurnObserver = field(default_factory=NullObserver)
    archival: ArchivalMemory | None = None
    recall: RecallMemory | None = None
    retrieved: tuple[str, ...] = ()  # archival memories fetched for the current turn, best first
    turn_time: datetime | None = None  # when the current turn began: the prompt states one time per turn
    hold_steps: bool = True  # a step whose effects all commit with it rides on the next one's commit (`runtime.loop`)
    mcp: McpToolset | None = None  # the agent's MCP servers, whose tools join `tools` at each turn (`runtime.mcp`)
    # Personal data replaced by placeholders where text enters (`spec.privacy`; the default changes nothing).
    privacy: AgentPrivacy = field(default_factory=lambda: AgentPrivacy(()))
    home: Path | None = None  # the state folder (a forget rewrites the agent's traces there)
    review_queue: ReviewQueue | None = None  # memories held for a person's review (`memory.review`)
    _model: ModelClient | None = None
    monitor: PressureMonitor = field(init=False)
    forgetting: AgentForgetting = field(init=False)

    def __post_init__(self) -> None:
        self.monitor = PressureMonitor(self)
        self.forgetting = AgentForgetting(self, self.home)
        self.read_through(LiveReads(lambda: listener(self.observer)))
        self._hear_clock()

    def _hear_clock(self) -> None:
        """Make the agent's clock a `HeardClock` (its readings go to whoever hears the agent: a trace recorder
        notes them), and its memory services' too where they share it; once, when the agent is made."""
        raw = self.clock
        heard = raw if isinstance(raw, HeardClock) else HeardClock(raw)
        heard.hears = lambda: listener(self.observer)
        self.clock = heard
        for part in (self.archival, self.recall):
            if isinstance(part, ArchivalService | RecallService) and part.clock is raw:
                part.clock = heard

    def read_through(self, tape: ReadTape) -> None:
        """Send what archival and recall memory read for this agent through `tape`: live ones report each read to
        an observer that records them; a replay's serves them from its trace (`pagemind.runtime.memory.reads`)."""
        if isinstance(self.archival, ArchivalService):
            self.archival.reads.tape = tape
        if isinstance(self.recall, RecallService):
            self.recall.tape = tape

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
        hold_steps: bool = True,
    ) -> Agent:
        """Load the agent defined by a YAML file (or a spec), creating its stored state on first use.

        `model` replaces the configured endpoint (tests, replays); `store` shares an open database; `hold_steps`:
        see `runtime.loop` (off: every step commits alone).
        """
        spec = path if isinstance(path, AgentSpec) else load_spec(path)
        settings = settings or Settings.from_env()
        store = store or StateStore.open(settings.database_url, Encryption.of(settings))
        stored = None if reset_memory else await store.unchanged_agent(spec)
        if stored is not None:  # nothing to write: three reads (`state.agent_load`)
            record, blocks, window = stored.record, stored.blocks, Window.from_stored(store, stored)
        else:
            record = store.ensure_agent(spec, reset_memory=reset_memory)
            window = Window.load(store, record)
            blocks, window.block_versions = store.load_core(record.id, spec)
        archival, recall = build_external_memory(spec, record, store, settings, clock)
        review = ReviewQueue(record.id, store.engine, archival, spec.memory.review_policy, clock) if archival else None
        return cls(
            spec=spec,
            record=record,
            store=store,
            memory=CoreMemory(blocks),
            window=window,
            tools=spec.resolved_tools(),
            model_override=model,
            clock=clock,
            archival=archival,
            recall=recall,
            hold_steps=hold_steps,
            mcp=McpToolset.for_servers(spec.mcp_servers),
            privacy=AgentPrivacy.of(spec.privacy, store.engine, record.id),
            home=settings.home,
            review_queue=review,
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

    async def send(self, text: str, *, idempotency_key: str | None = None, wait: float = DEFAULT_WAIT) -> str | None:
        """Run one turn with a user message; returns the agent's reply (None if it never sent one).

        See `run_turn` for `idempotency_key` and `wait`."""
        return (await self.run_turn(text, idempotency_key=idempotency_key, wait=wait)).reply

    async def run_turn(
        self, text: str, *, idempotency_key: str | None = None, wait: float = DEFAULT_WAIT
    ) -> TurnResult:
        """Run one turn with a user message to its end; the full result (reply, stop reason, steps, messages).

        The turn holds the agent's lock from start to end, so turns of one agent never overlap, whichever task or
        process runs them; it waits up to `wait` seconds for a turn elsewhere, then raises `AgentBusy` having
        stored nothing. Under the lock it first reads again whatever another process changed since this agent
        last looked. With `idempotency_key`, the same key again returns the first turn's result and stores
        nothing new; a turn a crash interrupted is completed instead (`runtime.loop.run_turn`)."""
        async with self.store.turn_lock(self.record.id, wait, self.name):
            crash_point("turn.locked")
            await self.refresh()
            with self._turn_stats():
                result = await run_turn(self, text, idempotency_key=idempotency_key)
            if self.forgetting.queued:  # the turn asked to forget: its own messages and trace lines too
                await self.forgetting.after_turn()
            return result

    def _turn_stats(self) -> AbstractContextManager[None]:
        """The archival statistics for one turn: checked against the revision `refresh` read with the rest."""
        if not isinstance(self.archival, ArchivalService):
            return nullcontext()
        return self.archival.turn_stats(self.window.archival_revision)

    def turn_stats(self) -> AbstractContextManager[None]:
        """The archival statistics for one turn run by `loop.run_turn` from elsewhere (the daemon's message items):
        the revision read once for the turn, as `run_turn` here does, and not once per read (a SQL round trip
        each, twice a step). A scope already open (`run_turn`'s) stands. `PAGEMIND_TURN_SHORTCUTS=off`: none."""
        if Settings.read("turn_shortcuts") == "off" or not isinstance(self.archival, ArchivalService):
            return nullcontext()
        return self.archival.turn_stats()

    async def refresh(self) -> None:
        """Read the blocks and the window again if another process changed them since this agent read them."""
        if not await self.window.is_stale():
            return
        self.window.reload()
        blocks, self.window.block_versions = self.store.load_core(self.record.id, self.spec)
        self.memory = CoreMemory(blocks)

    def compile(self) -> CompiledContext:
        """The prompt the model would see now."""
        archival_count, archival_tags = self.archival.stats() if self.archival else (None, ())
        window = self.window
        now = self.turn_time or self.clock()
        stats = MemoryStats(now, window.recall_count, len(window.messages), archival_count, archival_tags)
        inputs = ContextInputs(
            system=self.spec.system,
            blocks=tuple(self.memory.blocks),
            messages=tuple(window.messages),
            stats=stats,
            tools=tuple(t.openai_schema() for t in self.tools.values()),
            summary=window.summary,
            encoding=self.spec.model.encoding or DEFAULT_ENCODING,
            max_message_tokens=max_message_tokens(self.spec),
            retrieved=self.retrieved,
            wire_cache=window.wire_cache,
            system_messages=self.spec.model.system_messages,
        )
        return compile_context(inputs)

    async def prefetch(self, user_message: str) -> None:
        """Fetch the archival memories most relevant to this turn into the prompt, within the retrieved budget.

        The ranking's noise floor means an unrelated message fetches nothing; the salience gate
        (`memory.salience`) skips the lookup for chit-chat.
        """
        crash_point("turn.prefetch")  # the user message is in the inbox; no step has run
        if self.mcp is not None:  # the turn's tools first: MCP servers listed if new or changed (`runtime.mcp`)
            await self.mcp.sync(self.tools)
        self.turn_time = self.clock()
        top_k = self.spec.memory.memories_per_turn
        if (
            self.archival is None
            or top_k == 0
            or not user_message.strip()
            or not await lookup_gate(
                user_message,
                self.spec.memory.salience,
                report=self.report,
                model=lambda request: self.call_model(request, PREFETCH_STEP),
            )
        ):
            self.retrieved = ()
            return
        # Shown, not used: no hit counted, but the memories count as retrieved for decay (memory.decay).
        hits = await self.archival.search(user_message, top_k=top_k, count_hits=False, seen=True)
        budget = min(self.spec.memory.budgets.retrieved, usable_window(self.spec) // 8)
        lines, used = [], 0
        for hit in hits:
            line = f"[{hit.date:%Y-%m-%d}] ({hit.kind}) {hit.text}"
            used += count_tokens(line, self.spec.model.encoding or DEFAULT_ENCODING) + 2
            if used > budget:
                break
            lines.append(line)
        self.retrieved = tuple(lines)

    def extraction_gate(self, messages: Sequence[Message]) -> Salience | None:
        """The salience gate's decision on messages leaving the window (None: the gate is off)."""
        return extraction_gate(messages, self.spec.memory.salience)

    def step_request(self, context: CompiledContext) -> ModelRequest:
        """The request for an agent step with this compiled context (a squeezed window that has grown into the
        output reserve asks for a shorter reply)."""
        model = self.spec.model
        reply = max_reply_tokens(self.spec, math.ceil(context.total_tokens * self.window.correction))
        return ModelRequest(
            model.name, context.messages, context.tools, model.temperature, reply, encoded_messages=context.encoded
        )

    async def call_model(self, request: ModelRequest, step: int) -> ModelResponse:
        """Every model call (steps, summaries, extraction) goes through here, so observers see them all; the
        answer is redacted by the agent's privacy policy before anything sees it.

        A step's call streams when the observer wants the reply as it is written and the model can stream
        (`runtime.reply_stream`); the response, and what observers see of it, is the same either way."""
        hears = listener(self.observer)
        hears.on_event(ModelRequestEvent.from_request(step, request))
        model = self.model
        if request.purpose == "step" and wants_deltas(hears) and isinstance(model, StreamingModelClient):
            replying = frozenset(name for name, tool in self.tools.items() if tool.terminal)
            sink = ReplyStream(hears, step, replying)
            response = dataclasses.replace(await model.stream(request, sink), streamed=sink.text)
        else:
            response = await model.complete(request)
        response = await self.privacy.response(response)  # before anything reads, stores or records it
        hears.on_event(ModelResponseEvent.from_response(step, response))
        return response

    async def summarize(self, messages: Sequence[Message], budget: int, model: str | None = None) -> str:
        """A summary of `messages` in at most `budget` tokens by the summarizer model (`model`, default
        `memory.summarizer_model`, else the agent's): the recursive summary's prompt and chunking
        (`pressure.summarizer`), each call through `call_model`. Raises ModelError or ValueError (empty answer)."""
        spec = self.spec
        result = await summarize(
            lambda request: self.call_model(request, 0),
            model=model or spec.memory.summarizer_model or spec.model.name,
            old_summary="",
            evicted=messages,
            budget=budget,
            window=usable_window(spec),
            encoding=spec.model.encoding or DEFAULT_ENCODING,
        )
        return result.text

    def tool_context(self, working: CoreMemory) -> StepContext:
        """The context tools get for a step that edits `working`."""
        return StepContext(
            self.name, working, self.clock, self.archival, self.recall, self.forgetting, self.review_queue
        )

    def now(self) -> datetime:
        """The agent's clock reading."""
        return self.clock()

    def report(self, event: Event) -> None:
        """Pass what happened (the loop's steps, tools and edits; the monitor's repairs, warnings and flushes) to the
        agent's observer and the current run's (`runtime.observer.observing`)."""
        listener(self.observer).on_event(event)
