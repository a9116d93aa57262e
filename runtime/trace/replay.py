"""Replay a trace offline: the real loop, tools and compiler against the recorded model responses.

Replay rebuilds the agent from the trace header's snapshot in a scratch database (a temporary SQLite file; the
agent's real memory is never touched), serves the recorded clock readings and model responses in order and the
recorded external-memory reads by request (`trace.served_reads`: archival and recall memory are not in the
snapshot; their writes go to the scratch store), and compares every request, tool call, tool result, memory edit,
runtime event and step end with the recording. A trace recorded before reads were (header `reads` false) reads
the empty scratch store instead, and a divergence then says so.
The first difference stops the replay with a `Divergence` (exit code 1). A recorded response left unused is a
divergence too. A trace cut short by a crash replays up to its last complete step and says where it ends.

Fork (`from_step` with a live model): recorded responses up to the given step of the trace, then the live model
for the rest of that turn and for every later turn's user message; the new run is recorded as a new trace.
"""

from __future__ import annotations

import tempfile
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any, Literal

import structlog
from pydantic import ValidationError

from pagemind.blocks import CoreMemory
from pagemind.runtime.agent import Agent
from pagemind.runtime.loop import run_turn
from pagemind.runtime.model.client import ModelClient, ModelRequest, ModelResponse, response_from_body
from pagemind.runtime.observer import listener
from pagemind.runtime.process.home import cache_folder
from pagemind.runtime.process.problems import one_line_problems
from pagemind.runtime.process.settings import Settings
from pagemind.runtime.spec.agent import AgentSpec, BlockSpec
from pagemind.runtime.spec.memory import SalienceConfig
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.trace.comparison import Comparator, Divergence, ReplayClock, TraceEnded
from pagemind.runtime.trace.format import Parent
from pagemind.runtime.trace.header import snapshot_message
from pagemind.runtime.trace.reader import Trace
from pagemind.runtime.trace.recorded_tools import TRUST_HINT, custom_tools, replay_tools
from pagemind.runtime.trace.recorder import TraceRecorder
from pagemind.runtime.trace.served_reads import ServedReads

log = structlog.get_logger("pagemind.replay")

LOCAL_KEY_ENV = "OPENAI_API_KEY"  # the only key variable a replay's agent may name


# -- outcomes -------------------------------------------------------------------------------------------------


class ReplayError(ValueError):
    """A trace that cannot be replayed at all (its spec no longer loads, a bad --from-step …)."""


@dataclass
class ReplayReport:
    """What a replay found."""

    trace: Trace
    status: Literal["identical", "diverged", "truncated", "forked"]
    steps: int  # complete steps replayed identically
    divergence: Divergence | None = None
    new_trace: Path | None = None
    untrusted: tuple[str, ...] = ()  # custom tools served their recorded results instead of running

    @property
    def exit_code(self) -> int:
        """0 identical (or a fork / a truncated trace that matched as far as it goes), 1 on a divergence."""
        return 1 if self.status == "diverged" else 0


# -- the scratch agent --------------------------------------------------------------------------------------------


def _start_time(trace: Trace) -> datetime:
    for event in [trace.header, *trace.events]:
        if event.clock:
            return event.clock[0]
    return trace.header.created_at


def replay_spec(trace: Trace, trust_tools: bool) -> AgentSpec:
    """The agent spec a trace's header recorded, validated; its tools imported only when trusted."""
    # Untrusted, the spec's tool references are checked for form only: importing a module runs its code.
    try:
        spec = AgentSpec.model_validate(trace.header.spec, context={"import_tools": trust_tools})
    except ValidationError as exc:
        raise ReplayError(
            f"{trace.path}:1: the recorded agent spec no longer loads: {one_line_problems(exc)}"
        ) from None
    # The recorded endpoint and key variable are the trace author's: the scratch agent never gets them (a fork's
    # live model is built from the local configuration, `pagemind replay --live`).
    spec.model = spec.model.model_copy(update={"base_url": None, "api_key_env": LOCAL_KEY_ENV})
    section = trace.header.spec.get("memory") or {}
    advanced = section.get("advanced") or {}  # `memory.salience` was recorded there from the tiers on (issue #32)
    if "salience" not in section and "salience" not in advanced:  # recorded before the salience gate existed
        spec.memory = spec.memory.model_copy(update={"salience": SalienceConfig(enabled=False)})
    # Seed blocks with the snapshot's exact values (model_construct: no stripping, no re-validation).
    # What the snapshot does not hold (a block's schema, whether it is ephemeral) comes from the recorded spec.
    # Untrusted, a schema named by a module outside the package is left off (importing it would run its code).
    recorded: dict[str, dict[str, Any]] = {
        b.label: {"schema_": b.schema_ if trust_tools or _shipped_schema(b.schema_) else None, "ephemeral": b.ephemeral}
        for b in spec.blocks
    }
    blocks = [
        BlockSpec.model_construct(**b.model_dump(), **recorded.get(b.label, {})) for b in trace.header.snapshot.blocks
    ]
    return spec.model_copy(update={"blocks": blocks})


def _shipped_schema(schema: dict[str, Any] | str | None) -> bool:
    """Whether a block's schema can be used without importing code from elsewhere: inline, or pagemind's own."""
    return not isinstance(schema, str) or schema.startswith("pagemind.")


def scratch_settings(home: Path) -> Settings:
    """Settings that keep every store of a replay under `home`: SQLite there, the embedded vector store there
    (never QDRANT_URL); the configured embedder stays, so archival rankings come out as they did."""
    return Settings.from_env().model_copy(
        update={
            "home": home,
            "database_url": f"sqlite:///{home / 'replay.db'}",
            "qdrant_url": None,
            "qdrant_api_key": None,
        }
    )


async def scratch_agent(
    trace: Trace, model: ModelClient, clock: ReplayClock, home: Path, trust_tools: bool = False
) -> Agent:
    """The agent as the trace header found it, in fresh stores under `home` (the real ones are never opened).
    Untrusted (the default), only built-in tools run; every other tool call is served its recorded result."""
    spec = replay_spec(trace, trust_tools)
    settings = scratch_settings(home)
    store = StateStore(make_engine(settings.database_url))
    if trust_tools:  # a trace never starts MCP servers: their tools serve their recorded results (`spec.mcp`)
        loaded = spec.model_copy(update={"mcp_servers": []})
        agent = await Agent.load(loaded, model=model, store=store, settings=settings, clock=clock)
        agent.tools |= {n: t for n, t in replay_tools(trace, []).items() if n not in agent.tools}
    else:
        # Loaded with its built-in tools only (Agent.load imports every tool it is given), then given stand-ins.
        builtins = [ref for ref in spec.tools if ref not in custom_tools(spec.tools)]
        agent = await Agent.load(
            spec.model_copy(update={"tools": builtins}), model=model, store=store, settings=settings, clock=clock
        )
        agent.spec, agent.tools = spec, replay_tools(trace, spec.tools)
    agent.monitor.concurrent = False  # a flush's model calls in the order the trace holds their answers
    snapshot = trace.header.snapshot
    state = snapshot.agent_state
    agent.monitor.told_squeezed = bool(state.get("pressure_squeezed_told", False))
    await agent.window.restore(
        [snapshot_message(m) for m in snapshot.messages],
        snapshot.summary,
        warned=bool(state.get("pressure_warned", False)),
        correction=float(state.get("token_correction", 1.0)),
        recall_count=snapshot.recall_count,
    )
    agent.memory = CoreMemory([b.to_block(b.value) for b in spec.blocks])  # the snapshot's blocks (`replay_spec`)
    prepared = state.get("flush_prepared")
    if isinstance(prepared, dict):
        agent.monitor.adopt_prepared(int(prepared["count"]), datetime.fromisoformat(str(prepared["at"])))
    return agent


# -- serving the recording ------------------------------------------------------------------------------


class ReplayModel:
    """A `ModelClient` serving the recorded responses in order; the live model once a fork goes live."""

    def __init__(self, comparator: Comparator, live: ModelClient | None = None):
        self.comparator, self.live = comparator, live

    async def complete(self, request: ModelRequest) -> ModelResponse:
        """The recorded response to this request (or the live model's, in a fork's live part)."""
        if self.comparator.live and self.live is not None:
            return await self.live.complete(request)
        recorded = self.comparator.recorded_response()
        return response_from_body(self.comparator.ids.translate(recorded.body), recorded.latency_ms)


# -- driving ------------------------------------------------------------------------------------------------------


def _check_from_step(trace: Trace, from_step: int | None, live: ModelClient | None) -> None:
    if (from_step is None) != (live is None):
        raise ReplayError("a fork needs both a live model and --from-step")
    if from_step is not None and not 1 <= from_step <= len(trace.steps) + 1:
        raise ReplayError(
            f"--from-step {from_step}: the trace has {len(trace.steps)} complete step(s); "
            f"choose 1 to {len(trace.steps) + 1}"
        )


async def replay(
    trace: Trace,
    *,
    live: ModelClient | None = None,
    from_step: int | None = None,
    record_to: Path | None = None,
    trust_tools: bool = False,
) -> ReplayReport:
    """Replay `trace` in a scratch state. With `live` and `from_step`, fork: the live model takes over at that
    step of the trace; `record_to` records the new run (its header names the parent). `trust_tools` imports and
    runs the custom tools the trace names; without it they are never imported and serve their recorded results."""
    _check_from_step(trace, from_step, live)
    with tempfile.TemporaryDirectory(prefix="replay-", dir=cache_folder()) as tmp:  # never the shared temp folder
        clock = ReplayClock(_start_time(trace))
        comparator = Comparator(trace, clock, from_step)
        agent = await scratch_agent(trace, ReplayModel(comparator, live), clock, Path(tmp), trust_tools)
        agent.observer = comparator
        if trace.header.reads:
            agent.read_through(ServedReads(comparator, lambda: listener(agent.observer)))
        recorder = None
        if record_to is not None:
            parent = Parent(trace=str(trace.path), from_step=from_step) if from_step else None
            recorder = TraceRecorder(path=record_to, parent=parent, cipher=trace.cipher).attach(agent)
        try:
            report = await _drive(trace, agent, comparator, live is not None, record_to)
            report.untrusted = () if trust_tools else tuple(custom_tools(agent.spec.tools))
            return report
        finally:
            if recorder:
                recorder.close()
            agent.store.engine.dispose()


async def _drive(
    trace: Trace, agent: Agent, comparator: Comparator, forking: bool, record_to: Path | None
) -> ReplayReport:
    try:
        for turn in trace.turns:
            await run_turn(agent, turn.user_message)
        comparator.finish()
    except (Divergence, TraceEnded):
        pass
    failure = comparator.failure  # also when something in the runtime swallowed the exception
    if isinstance(failure, Divergence):
        if not trace.header.reads:
            failure.detail = (failure.detail + "\n" if failure.detail else "") + OLD_TRACE_NOTE
        return ReplayReport(trace, "diverged", comparator.steps, failure, record_to)
    if forking:
        return ReplayReport(trace, "forked", comparator.steps, None, record_to)
    status: Literal["identical", "truncated"] = "identical" if trace.complete and failure is None else "truncated"
    return ReplayReport(trace, status, comparator.steps, None, record_to)


# -- reporting ----------------------------------------------------------------------------------------------------

OLD_TRACE_NOTE = (
    "(this trace was recorded before traces held what a turn read from archival and recall memory: the replay "
    "read them from an empty scratch store, so a turn that used stored memories cannot replay identically; a trace "
    "recorded now can)"
)


def trace_end_note(trace: Trace) -> str:
    """Where a truncated trace ends."""
    if not trace.steps:
        return "the trace ends before its first complete step"
    turn, step = trace.steps[-1]
    dropped = f"; {trace.dropped} unfinished event(s) after it were left out" if trace.dropped else ""
    return f"the trace ends after turn {turn} step {step} (step {len(trace.steps)} of the trace){dropped}"


def format_report(report: ReplayReport) -> str:
    """The user-facing text for a replay's outcome (and which custom tools it did not run)."""
    text = _outcome(report)
    if report.untrusted:
        text += (
            f"\n(not run: {', '.join(report.untrusted)} served recorded results; {TRUST_HINT} — only for "
            f"a trace you trust)"
        )
    return text


def _outcome(report: ReplayReport) -> str:
    trace, name = report.trace, report.trace.path.name
    if report.status == "diverged":
        d = report.divergence
        assert d is not None  # a diverged report carries its divergence
        where = f" ({name}:{d.line})" if d.line else f" ({name})"
        text = f"DIVERGED at event {d.index + 1} of {len(trace.events)}{where}, {d.where}: {d.what}"
        return text + (f"\n{d.detail}" if d.detail else "")
    if report.status == "forked":
        return (
            f"forked: {report.steps} recorded step(s) replayed identically, then the live model; "
            f"new trace: {report.new_trace}"
        )
    if report.status == "truncated":
        return (
            f"truncated trace: {trace_end_note(trace)}. Replayed {report.steps} step(s) up to there: "
            f"identical to the recording."
        )
    turns = len(trace.turns)
    return f"identical: {turns} turn(s), {report.steps} step(s) replayed offline match {name}"


def report_dict(report: ReplayReport) -> dict[str, Any]:
    """The outcome as JSON-friendly data."""
    d = report.divergence
    divergence = (
        {"event": d.index + 1, "line": d.line, "where": d.where, "what": d.what, "detail": d.detail} if d else None
    )
    return {
        "status": report.status,
        "steps": report.steps,
        "exit_code": report.exit_code,
        "divergence": divergence,
        "new_trace": str(report.new_trace) if report.new_trace else None,
        "untrusted_tools": list(report.untrusted),
    }
