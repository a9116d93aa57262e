"""A message item run as its agent's turn: the turn, keyed by its item, and the reflection it makes due.

The item is finished by the dispatcher after the turn, in a statement of its own (`Inbox.finish`); a kill between
the turn's last commit and that finish runs the item again, and its key returns the stored turn
(`runtime.loop.begin_turn`). Committing the finish with the last step saved a statement a turn, but measured
inside the host's noise (bench/RESULTS.md, "Daemon shortcuts on and off"), so it was removed.

An `app_turn` item (the OpenAI proxy's request with the app's own `tools`, or results for calls handed to it) is a
message item whose content is `AppTurn` as JSON: the user's text (none when the app only sends results), the app's
tools, and its results by call id (`runtime.app_calls`). A turn that pauses for the app's calls has them in its
result (`tool_calls`).
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import BaseModel, Field

from pagemind.runtime.agent import Agent
from pagemind.runtime.app_calls import NO_APP_TOOLS, AppTools
from pagemind.runtime.loop import StopReason, run_turn
from pagemind.runtime.reflection.run import due_reflection
from pagemind.runtime.state.records import utcnow
from pagemind.scheduler.queue.inbox import APP_TURN, Inbox, InboxItem
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


async def run_message(agent: Agent, item: InboxItem, inbox: Inbox, owner: str) -> dict[str, Any]:
    """Run a claimed message item as the agent's turn (owner: the daemon holding its lease); returns its result,
    for the item's finish."""
    text, app = item.content, NO_APP_TOOLS
    if item.kind == APP_TURN:
        turn_in = AppTurn.model_validate_json(item.content)
        text, app = turn_in.text, AppTools(tuple(turn_in.tools), turn_in.results, turn_in.forced)
    # A first attempt's key is new: `attempts` counts every claim, committed before the turn runs.
    turn = await run_turn(agent, text, idempotency_key=item.turn_key, new_key=item.attempts == 1, app=app)
    if not turn.app_calls:  # a paused turn is not over: no reflection between its calls and their results
        await queue_reflection(agent, item, inbox, owner)
    return turn_result(turn.turn_id, turn.reply, turn.stop_reason, turn.steps, turn.app_calls)


async def queue_reflection(agent: Agent, item: InboxItem, inbox: Inbox, owner: str) -> bool:
    """`memory.reflection.every_turns`: a `reflect` job behind this turn when one is due (serial with the agent's
    turns, off the user's path; keyed, so a job already waiting is not queued again). Returns whether one was due."""
    key = due_reflection(agent)
    if key is not None:
        await inbox.submit(agent.record.id, item.agent_name, "job", "reflect", key, utcnow(), owner)
    return key is not None
