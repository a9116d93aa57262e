"""The start of a turn (the design's step 1): its user message into the inbox, or the turn its idempotency key
names, returned as stored or resumed after its last committed step.

A retry never doubles the user message, and a turn paused for the app's tools (`runtime.app_calls`) resumes here
once the app answers its calls. `runtime.loop.run_turn` begins every turn with `begin_app_turn`.
"""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Protocol

import structlog

from pagemind.runtime.app_calls import AppTools, NothingToResume, answered_turn, open_calls, results_for
from pagemind.runtime.events import Event, TurnEvent
from pagemind.runtime.messages import Message
from pagemind.runtime.privacy.policy import AgentPrivacy
from pagemind.runtime.process.crashpoints import crash_point
from pagemind.runtime.turn_outcomes import StopReason, TurnResult
from pagemind.runtime.window import Window
from pagemind.tools import Tool

log = structlog.get_logger("pagemind.loop")  # the loop's logger: a turn's start is the loop's first step


class TurnStartAgent(Protocol):
    """What starting a turn needs of an agent: a part of `runtime.loop.LoopAgent`."""

    window: Window
    tools: dict[str, Tool]
    privacy: AgentPrivacy

    @property
    def name(self) -> str: ...
    def now(self) -> datetime: ...
    def report(self, event: Event) -> None: ...


class IdempotencyKeyReused(ValueError):
    """An idempotency key came back with a different message than the turn it names."""


async def begin_turn(
    agent: TurnStartAgent, text: str, key: str | None, new_key: bool = False, accepted: Message | None = None
) -> TurnResult | tuple[str, list[Message], int]:
    """Step 1: the turn's user message in the inbox; returns (turn id, its stored messages, the next step index),
    or the finished turn's result when `key` names one (nothing is stored then).

    A retry never doubles the user message: a key already used resumes its turn after the last committed step,
    and a message identical to one a failed turn left unanswered at the end of the window reuses that message
    and its turn (a failed turn stores nothing but its user message before its first step commits).

    `new_key`: the caller knows `key` was never used (the daemon's first attempt at an inbox item), so its lookup,
    a round trip, is skipped; were it used after all, storing it again fails on its primary key: never a double.

    `accepted`: the turn's user message, stored already with `key` by the same `StateStore.accept_message` (the
    daemon's submission for an agent whose worker lingered for it stores it with the inbox item, one statement for
    both: `scheduler.queue.inbox`); it is only put in view."""
    if accepted is not None:
        assert accepted.turn_id is not None  # stored as its turn's message
        agent.report(TurnEvent(step=0, turn_id=accepted.turn_id, user_message=text))
        return accepted.turn_id, agent.window.adopt_accepted(accepted), 1
    store, agent_id = agent.window.store, agent.window.agent_id
    turn_id = await store.turn_for_key(agent_id, key) if key is not None and not new_key else None
    if turn_id is None and (pending := agent.window.unanswered(text)) is not None:
        turn_id = pending.turn_id
        assert turn_id is not None  # `unanswered` returns only a message of a turn
        if key is not None:
            await store.add_turn_key(agent_id, key, turn_id, agent.now())
    crash_point("turn.begin")
    if turn_id is None:
        turn_id = uuid.uuid4().hex
        agent.report(TurnEvent(step=0, turn_id=turn_id, user_message=text))
        return turn_id, await agent.window.accept(Message("user", text, agent.now(), turn_id=turn_id), key), 1
    stored, steps = store.turn_messages(agent_id, turn_id), store.turn_steps(agent_id, turn_id)
    if stored and stored[0].content != text:
        raise IdempotencyKeyReused(f"idempotency key {key!r} was used for another message; use a new key")
    return stored_turn(agent, turn_id, stored, [s.stop_reason for s in steps])


def stored_turn(
    agent: TurnStartAgent, turn_id: str, stored: list[Message], stops: list[str | None]
) -> TurnResult | tuple[str, list[Message], int]:
    """A stored turn (its messages, its steps' stop reasons) as it stands: its result when its last step ended it
    (paused with calls still open included), else (turn id, messages, the next step index) to go on from."""
    waiting = open_calls(stored)
    if stops and stops[-1] is not None and (stops[-1] != StopReason.APP_TOOL_CALLS or waiting is not None):
        reason = StopReason(stops[-1])
        calls = waiting.calls if waiting is not None else ()
        return TurnResult(turn_id, stored_reply(agent, reason, stored), reason, len(stops), stored, calls)
    first = next((m.content or "" for m in stored if m.role == "user"), "")
    agent.report(TurnEvent(step=0, turn_id=turn_id, user_message=first))
    return turn_id, stored, len(stops) + 1


async def begin_app_turn(
    agent: TurnStartAgent, text: str, key: str | None, new_key: bool, app: AppTools, accepted: Message | None = None
) -> TurnResult | tuple[str, list[Message], int]:
    """Step 1 with the app's part (`runtime.app_calls`): calls a paused turn left open are answered first, by the
    app's results or, where it sent none, by `NO_RESULT`. Without a user message the results resume the paused
    turn (results sent again: the turn that took them, resumed or as stored); with one, it begins its own turn.
    A run again with a key its turn took (a crash) finds that turn and answers nothing again. `accepted`: a plain
    message stored with its inbox item (`begin_turn`; the daemon does so only while no call is open)."""
    if accepted is not None:
        return await begin_turn(agent, text, key, new_key, accepted)
    if text and not app.results and open_calls(agent.window.messages) is None:
        return await begin_turn(agent, text, key, new_key)  # no app part: one key lookup, begin_turn's
    store, agent_id = agent.window.store, agent.window.agent_id
    known = await store.turn_for_key(agent_id, key) if key is not None and not new_key else None
    if known is not None:
        return await begin_turn(agent, text, key, new_key) if text else await resume(agent, known, None)
    results = {call_id: await agent.privacy.text(content) for call_id, content in app.results.items()}
    paused = open_calls(agent.window.messages)
    if paused is not None:
        unknown = set(results) - {c.id for c in paused.calls}
        if unknown:
            log.warning("app_results_unknown", agent=agent.name, call_ids=sorted(unknown))
        await agent.window.answer(results_for(paused, results, agent.now()))
        if not text:
            return await resume(agent, paused.turn_id, key)
    elif not text:
        turn_id = answered_turn(agent.window, results) if results else None
        if turn_id is None:
            raise NothingToResume("no user message, and no results for tool calls the agent handed out")
        return await resume(agent, turn_id, key)
    return await begin_turn(agent, text, key, new_key=True)  # looked up above: unused (`new_key` says so too)


async def resume(agent: TurnStartAgent, turn_id: str, key: str | None) -> TurnResult | tuple[str, list[Message], int]:
    """A paused turn whose calls are answered, to go on from (or as stored, if it ended since); `key` now names it."""
    store, agent_id = agent.window.store, agent.window.agent_id
    if key is not None:
        await store.add_turn_key(agent_id, key, turn_id, agent.now())
    stops = [s.stop_reason for s in store.turn_steps(agent_id, turn_id)]
    return stored_turn(agent, turn_id, store.turn_messages(agent_id, turn_id), stops)


def stored_reply(agent: TurnStartAgent, reason: StopReason, messages: list[Message]) -> str | None:
    """The reply of a finished turn, from its stored messages (as `runtime.loop.reply_of` found it when the turn
    ran)."""
    if reason is StopReason.PLAIN_REPLY:
        return next((m.content for m in reversed(messages) if m.role == "assistant"), None)
    if reason is StopReason.SEND_MESSAGE:
        return next(
            (
                m.content
                for m in reversed(messages)
                if m.role == "tool" and not m.is_error and m.name in agent.tools and agent.tools[m.name].terminal
            ),
            None,
        )
    return None
