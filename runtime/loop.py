"""The agent loop, as the design's six steps.

A turn (1) takes the user message into the inbox, durably, or finds the turn its idempotency key names
(`runtime.turn_start`), and then runs steps until one ends the turn. A step (2) compiles the context, (3) lets the
pressure monitor repair, warn or flush it, (4) calls the model — a provider's `context_length_exceeded` forces a
flush and one retry — (5) dispatches the tool calls, whose errors go back to the model as results, and (6) commits
the step's messages, block edits and record in one transaction. Every step ends in a typed outcome
(`runtime.turn_outcomes`): run again, a reply, stopped with a reason, or paused for the app.

An app may lend the turn its own tools (`runtime.app_calls.AppTools`, passed per run: the OpenAI proxy's `tools`):
offered to the model beside the agent's, never run here. A step that calls one runs its other calls, commits, and
pauses the turn (`Paused`): the app runs its calls, and a run with their results resumes the turn where it paused.

A step that runs again and whose tools' effects all commit with it (core-memory edits, reads: `Tool.effects_in_step`)
is held instead (`Window.hold`): in view, and stored by the turn's next commit in the same transaction, one round
trip for both. Such a step has nothing outside the database to redo, so losing it to a crash or a failed turn is
the same as losing it before its commit: the turn redoes it from its start. At most one step is held at a time, so
the held step is the newest group of the window and no flush can evict it. Gain: own overhead per step x0.86-0.88
at low load on Postgres, x0.96 on SQLite (bench/RESULTS.md, "Held steps"); off (`Agent.hold_steps`, the daemon's
`hold_steps`), every step commits alone, with the same outcome.
"""

from __future__ import annotations

import dataclasses
import itertools
import time
from contextlib import AbstractContextManager
from datetime import datetime
from typing import Protocol

import structlog

from pagemind.blocks import BlockEdit, CoreMemory
from pagemind.runtime.app_calls import NO_APP_TOOLS, AppTools
from pagemind.runtime.compiler import CompiledContext
from pagemind.runtime.events import (
    Event,
    MemoryEditEvent,
    ReplyResetEvent,
    StepEndEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from pagemind.runtime.messages import Message
from pagemind.runtime.model.client import ContextLengthExceeded, ModelRequest, ModelResponse, turn_deadline
from pagemind.runtime.pressure.monitor import PressureMonitor
from pagemind.runtime.privacy.policy import AgentPrivacy
from pagemind.runtime.process.crashpoints import crash_point
from pagemind.runtime.spec.agent import AgentSpec
from pagemind.runtime.state.conversation.step_commit import LinkedWrite
from pagemind.runtime.state.records import StepRecord
from pagemind.runtime.turn_outcomes import (
    EndWrite,
    Paused,
    Replied,
    RunAgain,
    StepOutcome,
    Stopped,
    StopReason,
    TurnEnd,
    TurnResult,
)
from pagemind.runtime.turn_start import begin_app_turn
from pagemind.runtime.window import Window
from pagemind.tools import Tool, ToolContext, ToolResult, dispatch_tool_calls

log = structlog.get_logger("pagemind.loop")


class LoopAgent(Protocol):
    """What the loop needs of an agent (a turn's start needs a part: `turn_start.TurnStartAgent`); `runtime.agent.Agent`
    provides it."""

    spec: AgentSpec
    window: Window
    monitor: PressureMonitor
    memory: CoreMemory
    tools: dict[str, Tool]
    hold_steps: bool  # whether a step may be held for the next one's commit (the module docstring)
    privacy: AgentPrivacy  # personal data replaced by placeholders where text enters (the user's message, tools)

    @property
    def name(self) -> str: ...
    def now(self) -> datetime: ...
    async def prefetch(self, user_message: str) -> None: ...
    def step_request(self, context: CompiledContext) -> ModelRequest: ...
    async def call_model(self, request: ModelRequest, step: int) -> ModelResponse: ...
    def tool_context(self, working: CoreMemory) -> ToolContext: ...
    def report(self, event: Event) -> None: ...
    def turn_stats(self) -> AbstractContextManager[None]: ...


async def run_turn(
    agent: LoopAgent,
    user_message: str,
    idempotency_key: str | None = None,
    *,
    new_key: bool = False,
    accepted: Message | None = None,
    on_end: EndWrite | None = None,
    app: AppTools = NO_APP_TOOLS,
) -> TurnResult:
    """Run one user turn to its end: a `send_message`, a plain reply, or `max_steps_per_turn`.

    With an `idempotency_key` already used, the turn it started is returned as stored (finished) or completed
    from its last committed step (interrupted); see `turn_start.begin_turn`. The whole turn (retries and tool calls
    included) must end within `model.turn_deadline_s`, else it raises ModelDeadlineExceeded; the accepted
    message stays, and a step is committed whole or not at all. `new_key`, `accepted`: see `begin_turn` too. `on_end`:
    called once the last step's outcome is known, before it commits; the write it returns commits with that step (a
    turn that returns as stored, or fails, commits no last step: nothing is called then). `app`: the app's tools for
    this run and its results for a paused turn's calls (`runtime.app_calls`; an empty `user_message` with results
    resumes that turn)."""
    user_message = await agent.privacy.text(user_message)  # before it is stored, recorded or looked up
    begun = await begin_app_turn(agent, user_message, idempotency_key, new_key, app, accepted)  # 1. inbox, or resumed
    if isinstance(begun, TurnResult):
        return dataclasses.replace(begun, reply=await agent.privacy.filled(begun.reply))
    turn_id, messages, first = begun
    with agent.turn_stats():  # the archival statistics read once for the turn
        return await _run_steps(agent, user_message, (turn_id, messages, first), on_end, app)


async def _run_steps(
    agent: LoopAgent,
    user_message: str,
    begun: tuple[str, list[Message], int],
    on_end: EndWrite | None,
    app: AppTools,
) -> TurnResult:
    """The turn after its message is accepted (`begun`: its id, its stored messages, the next step's index):
    prefetch, then steps until a reply, a pause for the app's calls, or a stop."""
    turn_id, messages, first = begun
    async with turn_deadline(agent.spec.model.turn_deadline_s):
        await agent.prefetch(user_message)
        app = app.beside(agent.tools)  # after prefetch: an MCP server's tools join there
        stored_memory = agent.memory  # core memory as stored: what a failure with a held step goes back to
        try:
            for step in itertools.count(first):
                if not agent.window.held:
                    stored_memory = agent.memory
                outcome = await run_step(agent, turn_id, step, on_end, app)
                app = app.chosen()  # a forced call is the first step's only
                messages += outcome.messages
                match outcome:
                    case Replied(reason=reason, reply=reply):  # the user's own originals back in (`keep_originals`)
                        return TurnResult(turn_id, await agent.privacy.filled(reply), reason, step, messages)
                    case Paused(calls=calls, reply=reply):
                        filled = await agent.privacy.filled(reply)
                        return TurnResult(turn_id, filled, StopReason.APP_TOOL_CALLS, step, messages, calls)
                    case Stopped(reason=reason):
                        return TurnResult(turn_id, None, reason, step, messages)
        except BaseException:
            if agent.window.drop_held():  # never stored: out of view, and its edits out of memory
                agent.memory = stored_memory
            raise
    raise AssertionError("unreachable: itertools.count never ends")


async def run_step(
    agent: LoopAgent, turn_id: str, step: int, on_end: EndWrite | None = None, app: AppTools = NO_APP_TOOLS
) -> StepOutcome:
    """One step: compile and relieve the context, call the model, dispatch its tool calls (the app's are handed
    out, not run), commit atomically (with `on_end`'s write when the step ends the turn)."""
    started_at, started = agent.now(), time.perf_counter()
    compiled, response = await call_model(agent, step, app)  # 2. compile, 3. pressure, 4. model
    working = agent.memory.copy()
    app_names = app.names
    app_calls = tuple(c for c in response.tool_calls if c.name in app_names)
    results = await dispatch(agent, step, response, working, app_names)  # 5. tools
    reason = next_action(
        bool(response.tool_calls),
        any(r.terminal and not r.is_error for r in results),
        step,
        agent.spec.max_steps_per_turn,
        bool(app_calls),
    )
    reply = reply_of(response, results) if reason not in (None, StopReason.MAX_STEPS) else None
    if response.streamed and response.streamed != reply:  # e.g. send_message failed: the turn goes on
        agent.report(ReplyResetEvent(step=step, reason="the streamed text did not end the turn"))
    record = StepRecord(
        turn_id,
        step,
        agent.spec.model.name,
        response.prompt_tokens,
        response.completion_tokens,
        reason.value if reason else None,
        started_at,
        response.latency_ms,
        (time.perf_counter() - started) * 1000,
        response.cached_tokens,
    )
    ended = TurnEnd(turn_id, reply, reason, step, app_calls) if reason is not None else None
    rider = on_end(ended) if on_end is not None and ended is not None else None
    messages = step_messages(agent, turn_id, response, results)
    if reason is None and may_hold(agent, results):  # 6. with the next step's commit
        stored = hold(agent, step, record, messages, working)
    else:  # 6.
        stored = await commit(agent, step, record, messages, working, rider)
    log.info(
        "step",
        agent=agent.name,
        turn=turn_id,
        step=step,
        tool_calls=len(results),
        stop_reason=record.stop_reason,
        prompt_tokens=response.prompt_tokens,
        total_ms=round(record.total_ms, 2),
    )
    if reason is None:
        return RunAgain(stored)
    if reason is StopReason.MAX_STEPS:
        return Stopped(reason, stored)
    if reason is StopReason.APP_TOOL_CALLS:
        return Paused(app_calls, reply, stored)
    return Replied(reason, reply, stored)


async def call_model(
    agent: LoopAgent, step: int, app: AppTools = NO_APP_TOOLS
) -> tuple[CompiledContext, ModelResponse]:
    """Steps 2–4: the relieved context and the model's answer to it (the app's tools offered after the agent's); a
    context overflow flushes and retries once."""
    for attempt in (1, 2):
        crash_point("step.before_relieve")
        compiled = await agent.monitor.relieve(step, force=attempt == 2)
        crash_point("step.before_model")
        request = agent.step_request(compiled)
        if app.schemas:
            request = dataclasses.replace(request, tools=[*request.tools, *app.schemas], tool_choice=app.tool_choice)
        try:
            response = await agent.call_model(request, step)
        except ContextLengthExceeded:
            if attempt == 2:
                raise
            log.warning("context_length_exceeded", agent=agent.name, estimated=compiled.total_tokens)
            continue
        crash_point("step.after_model")
        await agent.monitor.track_usage(compiled, response)
        return compiled, response
    raise AssertionError("unreachable: the second attempt returns or raises")


async def dispatch(
    agent: LoopAgent, step: int, response: ModelResponse, working: CoreMemory, app_names: frozenset[str] = frozenset()
) -> list[ToolResult]:
    """Step 5: run the response's tool calls against a working copy of core memory; errors become results. Calls
    of the app's tools (`app_names`) are not run: the app answers them (`Paused`)."""
    for call in response.tool_calls:
        agent.report(ToolCallEvent.from_call(step, call))
    crash_point("dispatch.before_tools")
    own = [c for c in response.tool_calls if c.name not in app_names]
    results = await dispatch_tool_calls(own, agent.tools, agent.tool_context(working))
    results = await agent.privacy.results(results)  # a tool may read personal data from anywhere
    crash_point("dispatch.after_tools")
    for result in results:
        agent.report(ToolResultEvent.from_result(step, result))
    return results


async def commit(
    agent: LoopAgent,
    step: int,
    record: StepRecord,
    messages: list[Message],
    working: CoreMemory,
    rider: LinkedWrite | None = None,
) -> list[Message]:
    """Step 6: store the step's record, messages and block edits in one transaction (with `rider`'s write, and
    after a held step), then adopt the edits. Returns every message stored (a held step's first)."""
    edits = list(working.pending)
    crash_point("commit.before")
    _, stored = await agent.window.commit_step(record, messages, edits, rider)
    crash_point("commit.before_adopt_memory")
    adopt(agent, step, record, edits, working)
    return stored


def may_hold(agent: LoopAgent, results: list[ToolResult]) -> bool:
    """Whether a step that runs again may be held for the next step's commit: the agent holds steps, no step is
    held already, and each of its calls changed nothing outside its commit (a tool flagged so, or an unknown one,
    which never ran)."""
    return (
        agent.hold_steps
        and not agent.window.held
        and all((tool := agent.tools.get(result.name)) is None or tool.effects_in_step for result in results)
    )


def hold(
    agent: LoopAgent, step: int, record: StepRecord, messages: list[Message], working: CoreMemory
) -> list[Message]:
    """Step 6, deferred: the step in view and its edits adopted, stored by the turn's next commit (the module
    docstring says when). Returns nothing stored: that commit returns this step's messages with its own."""
    edits = list(working.pending)
    agent.window.hold(record, messages, edits)
    adopt(agent, step, record, edits, working)
    return []


def adopt(agent: LoopAgent, step: int, record: StepRecord, edits: list[BlockEdit], working: CoreMemory) -> None:
    """The step's edits become the agent's core memory; its edits and its end go to the observer."""
    working.clear_pending()
    agent.memory = working
    for edit in edits:
        agent.report(MemoryEditEvent.from_edit(step, edit))
    agent.report(StepEndEvent(step=step, stop_reason=record.stop_reason))
    crash_point("step.end")


def next_action(
    has_tool_calls: bool, terminal_succeeded: bool, step: int, max_steps: int, app_calls: bool = False
) -> StopReason | None:
    """Whether the turn stops after this step, and why; None means "call the model again". Calls of the app's
    tools pause the turn whatever else the step did: they must be answered."""
    if not has_tool_calls:
        return StopReason.PLAIN_REPLY
    if app_calls:
        return StopReason.APP_TOOL_CALLS
    if terminal_succeeded:
        return StopReason.SEND_MESSAGE
    if step >= max_steps:
        return StopReason.MAX_STEPS
    return None


def reply_of(response: ModelResponse, results: list[ToolResult]) -> str | None:
    """The user-facing reply of a step that ended the turn: the last successful terminal tool's text, or the
    model's plain text."""
    terminal = [r.content for r in results if r.terminal and not r.is_error]
    return terminal[-1] if terminal else (response.content if not response.tool_calls else None)


def step_messages(agent: LoopAgent, turn_id: str, response: ModelResponse, results: list[ToolResult]) -> list[Message]:
    """The assistant message and one tool message per result, as the step will store them."""
    now = agent.now()
    assistant = Message("assistant", response.content, now, tool_calls=response.tool_calls, turn_id=turn_id)
    tool_messages = [
        Message("tool", r.content, now, tool_call_id=r.call_id, name=r.name, is_error=r.is_error, turn_id=turn_id)
        for r in results
    ]
    return [assistant, *tool_messages]
