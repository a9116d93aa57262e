"""A message item run as its agent's turn: the turn, keyed by its item, its item's finish, and the reflection it
makes due.

The item's finish is one statement (`Inbox.finish`), committed in one of two places, a strategy chosen by
`DaemonConfig.finish_with_last_step`: on, it rides on the turn's last step's statement
(`runtime.turn_outcomes.EndWrite`), so the turn's end and its item's are one commit and a turn costs one round trip
less; off (or while a daemon in another process watches the run: its relayed events are written before the item's
end, `RunFanout.settle`), the dispatcher runs it after the turn. A kill between the turn's last commit and a finish
apart runs the item again, and its key returns the stored turn (`runtime.turn_start.begin_turn`).

An `app_turn` item (the OpenAI proxy's request with the app's own `tools`, or results for calls handed to it) is a
message item whose content is `AppTurn` as JSON: the user's text (none when the app only sends results), the app's
tools, and its results by call id (`runtime.app_calls`). A turn that pauses for the app's calls has them in its
result (`tool_calls`).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

from pydantic import BaseModel, Field

from pagemind.runtime.agent import Agent
from pagemind.runtime.app_calls import NO_APP_TOOLS, AppTools
from pagemind.runtime.loop import run_turn
from pagemind.runtime.reflection.run import due_reflection
from pagemind.runtime.state.conversation.step_commit import LinkedWrite
from pagemind.runtime.state.records import utcnow
from pagemind.runtime.turn_outcomes import StopReason, TurnEnd
from pagemind.scheduler.queue.inbox import Inbox
from pagemind.scheduler.queue.inbox_item import APP_TURN, InboxItem
from pagemind.scheduler.streams.fanout import RunFanout
from pagemind.tools import ToolCall


class AppTurn(BaseModel):
    """An `app_turn` item's content (see the module docstring)."""

    text: str = ""
    tools: list[dict[str, Any]] = Field(default_factory=list)
    results: dict[str, str] = Field(default_factory=dict)
    forced: str | None = None  # the app's function its `tool_choice` forces

    def encoded(self) -> str:
        """The item's content: the same turn always gives the same text (the inbox compares a key's content)."""
        return json.dumps(self.model_dump(), sort_keys=True, ensure_ascii=False)


async def redacted_app_turn(content: str, redact: Callable[[str], Awaitable[str]]) -> str:
    """An `app_turn` content with its text and results as the agent's privacy policy stores them."""
    turn = AppTurn.model_validate_json(content)
    text = await redact(turn.text) if turn.text else ""
    results = {call_id: await redact(result) for call_id, result in turn.results.items()}
    return AppTurn(text=text, tools=turn.tools, results=results, forced=turn.forced).encoded()


def turn_result(
    turn_id: str, reply: str | None, stop_reason: StopReason, steps: int, app_calls: tuple[ToolCall, ...] = ()
) -> dict[str, Any]:
    """A message item's `result`: what `GET /v1/runs/{id}` shows of its turn (`tool_calls`: a turn paused for the
    app's calls)."""
    result: dict[str, Any] = {"reply": reply, "stop_reason": stop_reason.value, "steps": steps, "turn_id": turn_id}
    if app_calls:
        result["tool_calls"] = [{"id": c.id, "name": c.name, "arguments": c.arguments} for c in app_calls]
    return result


class FinishWithLastStep:
    """A message item's finish, committed with its turn's last step (the module docstring), unless `enabled` is off
    or a daemon elsewhere watches the run."""

    def __init__(
        self,
        inbox: Inbox,
        fanout: RunFanout,
        owner: str,
        item: InboxItem,
        enabled: bool = True,
        apart: Callable[[], bool] = lambda: False,
    ):
        self.inbox, self.fanout, self.owner, self.item, self.enabled = inbox, fanout, owner, item, enabled
        self.apart = apart  # asked at the last step: True when this turn's item must be finished after the turn
        self.rider: LinkedWrite | None = None

    def __call__(self, end: TurnEnd) -> LinkedWrite | None:
        """The finish to commit with the last step, or None (finished apart)."""
        if not self.enabled or self.apart() or self.fanout.relayed(self.item.run_id):
            return None
        result = turn_result(end.turn_id, end.reply, end.stop_reason, end.steps, end.app_calls)
        self.rider = self.inbox.finish_rider(self.item, self.owner, utcnow(), result)
        return self.rider

    def outcome(self) -> InboxItem | None:
        """After the turn returned: the item as its finish left it, or None if it was not finished with the turn
        (a stored turn returned again, a watched run, the strategy off)."""
        if self.rider is None:
            return None
        return self.inbox.finished(self.item, self.rider.row)


async def run_message(
    agent: Agent, item: InboxItem, inbox: Inbox, fanout: RunFanout, owner: str, finish_with_last_step: bool = True
) -> tuple[dict[str, Any], InboxItem | None]:
    """Run a claimed message item as the agent's turn (owner: the daemon holding its lease): (its result, the item
    as finished with the turn's last step, or None when the dispatcher is to finish it apart)."""
    # Finished apart, after the turn: a reply whose kept originals are filled back in (`privacy.keep_originals`) is
    # known only then, and a turn that asked to forget is done only once its messages and traces are rewritten.
    with_last_step = finish_with_last_step and not agent.privacy.keeps_originals
    finish = FinishWithLastStep(
        inbox, fanout, owner, item, enabled=with_last_step, apart=lambda: bool(agent.forgetting.queued)
    )
    text, app = item.content, NO_APP_TOOLS
    if item.kind == APP_TURN:
        turn_in = AppTurn.model_validate_json(item.content)
        text, app = turn_in.text, AppTools(tuple(turn_in.tools), turn_in.results, turn_in.forced)
    # A first attempt's key is new: `attempts` counts every claim, committed before the turn runs.
    turn = await run_turn(
        agent,
        text,
        idempotency_key=item.turn_key,
        new_key=item.attempts == 1,
        accepted=item.accepted,
        on_end=finish,
        app=app,
    )
    if agent.forgetting.queued:  # the turn asked to forget: its messages and trace lines too (`runtime.forgetting`)
        await agent.forgetting.after_turn()
    finished = finish.outcome()
    # A paused turn is not over: no reflection between its calls and their results.
    if not turn.app_calls and await queue_reflection(agent, item, inbox, owner) and finished is not None:
        finished = replace(finished, more=True)  # the job came after the finish: claim it next
    return turn_result(turn.turn_id, turn.reply, turn.stop_reason, turn.steps, turn.app_calls), finished


async def queue_reflection(agent: Agent, item: InboxItem, inbox: Inbox, owner: str) -> bool:
    """`memory.reflection.every_turns`: a `reflect` job behind this turn when one is due (serial with the agent's
    turns, off the user's path; keyed, so a job already waiting is not queued again). Returns whether one was due."""
    key = due_reflection(agent)
    if key is not None:
        await inbox.submit(agent.record.id, item.agent_name, "job", "reflect", key, utcnow(), owner)
    return key is not None
