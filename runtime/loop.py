"""The agent loop: compile → call the model → dispatch tools → commit, until the turn ends."""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass
from enum import Enum
from typing import TYPE_CHECKING

import structlog

from pagemind.runtime.messages import Message
from pagemind.runtime.model_client import ModelResponse
from pagemind.runtime.state.store import StepRecord
from pagemind.tools import ToolResult, dispatch_tool_calls

if TYPE_CHECKING:
    from pagemind.runtime.agent import Agent

log = structlog.get_logger("pagemind.loop")


class StopReason(str, Enum):
    """Why a turn ended."""

    SEND_MESSAGE = "send_message"
    PLAIN_REPLY = "plain_reply"
    MAX_STEPS = "max_steps"


@dataclass(frozen=True)
class TurnResult:
    """The outcome of one user turn."""

    turn_id: str
    reply: str | None
    stop_reason: StopReason
    steps: int
    messages: list[Message]


def next_action(has_tool_calls: bool, terminal_succeeded: bool, step: int, max_steps: int) -> StopReason | None:
    """Whether the turn stops after this step, and why; None means "call the model again"."""
    if not has_tool_calls:
        return StopReason.PLAIN_REPLY
    if terminal_succeeded:
        return StopReason.SEND_MESSAGE
    if step >= max_steps:
        return StopReason.MAX_STEPS
    return None


def _reply(response: ModelResponse, results: list[ToolResult]) -> str | None:
    terminal = [r.content for r in results if r.terminal and not r.is_error]
    return terminal[-1] if terminal else (response.content if not response.tool_calls else None)


def _step_messages(agent: "Agent", turn_id: str, response: ModelResponse, results: list[ToolResult]) -> list[Message]:
    now = agent.clock()
    assistant = Message("assistant", response.content, now, tool_calls=response.tool_calls, turn_id=turn_id)
    tool_messages = [
        Message("tool", r.content, now, tool_call_id=r.call_id, name=r.name, is_error=r.is_error, turn_id=turn_id)
        for r in results
    ]
    return [assistant, *tool_messages]


async def run_step(agent: "Agent", turn_id: str, step: int) -> tuple[StopReason | None, str | None, list[Message]]:
    """One model call and its tool calls, committed atomically. Returns (stop reason, reply, stored messages)."""
    started_at, started = agent.clock(), time.perf_counter()
    response = await agent.think(step)
    working = agent.memory.copy()
    for call in response.tool_calls:
        agent.observer.tool_call(step, call)
    results = await dispatch_tool_calls(list(response.tool_calls), agent.tools, agent.tool_context(working))
    for result in results:
        agent.observer.tool_result(step, result)
    reason = next_action(bool(response.tool_calls), any(r.terminal and not r.is_error for r in results),
                         step, agent.spec.max_steps_per_turn)
    record = StepRecord(turn_id, step, agent.spec.model.name, response.prompt_tokens, response.completion_tokens,
                        reason.value if reason else None, started_at, response.latency_ms,
                        (time.perf_counter() - started) * 1000)
    stored = agent.commit_step(record, _step_messages(agent, turn_id, response, results), working)
    for edit in stored.edits:
        agent.observer.memory_edit(step, edit)
    agent.observer.step_end(step, reason.value if reason else None)
    log.info("step", agent=agent.name, turn=turn_id, step=step, tool_calls=len(results),
             stop_reason=reason.value if reason else None, prompt_tokens=response.prompt_tokens,
             total_ms=round(record.total_ms, 2))
    return reason, _reply(response, results), stored.messages


async def run_turn(agent: "Agent", user_message: str) -> TurnResult:
    """Run one user turn to its end: a `send_message`, a plain reply, or `max_steps_per_turn`."""
    turn_id = uuid.uuid4().hex
    agent.observer.turn_started(agent, turn_id, user_message)
    messages = agent.accept(Message("user", user_message, agent.clock(), turn_id=turn_id))
    await agent.prefetch(user_message)
    step, reason, reply = 0, None, None
    while reason is None:
        step += 1
        reason, reply, stored = await run_step(agent, turn_id, step)
        messages += stored
    return TurnResult(turn_id, reply, reason, step, messages)
