"""A message item run as its agent's turn: the turn, keyed by its item, and the reflection it makes due.

The item is finished by the dispatcher after the turn, in a statement of its own (`Inbox.finish`); a kill between
the turn's last commit and that finish runs the item again, and its key returns the stored turn
(`runtime.loop.begin_turn`). Committing the finish with the last step saved a statement a turn, but measured
inside the host's noise (bench/RESULTS.md, "Daemon shortcuts on and off"), so it was removed.
"""

from __future__ import annotations

from typing import Any

from pagemind.runtime.agent import Agent
from pagemind.runtime.loop import StopReason, run_turn
from pagemind.runtime.reflection.run import due_reflection
from pagemind.runtime.state.records import utcnow
from pagemind.scheduler.queue.inbox import Inbox, InboxItem


def turn_result(turn_id: str, reply: str | None, stop_reason: StopReason, steps: int) -> dict[str, Any]:
    """A message item's `result`: what `GET /v1/runs/{id}` shows of its turn."""
    return {"reply": reply, "stop_reason": stop_reason.value, "steps": steps, "turn_id": turn_id}


async def run_message(agent: Agent, item: InboxItem, inbox: Inbox, owner: str) -> dict[str, Any]:
    """Run a claimed message item as the agent's turn (owner: the daemon holding its lease); returns its result,
    for the item's finish."""
    # A first attempt's key is new: `attempts` counts every claim, committed before the turn runs.
    turn = await run_turn(
        agent, item.content, idempotency_key=item.turn_key, new_key=item.attempts == 1, accepted=item.accepted
    )
    await queue_reflection(agent, item, inbox, owner)
    return turn_result(turn.turn_id, turn.reply, turn.stop_reason, turn.steps)


async def queue_reflection(agent: Agent, item: InboxItem, inbox: Inbox, owner: str) -> bool:
    """`memory.reflection.every_turns`: a `reflect` job behind this turn when one is due (serial with the agent's
    turns, off the user's path; keyed, so a job already waiting is not queued again). Returns whether one was due."""
    key = due_reflection(agent)
    if key is not None:
        await inbox.submit(agent.record.id, item.agent_name, "job", "reflect", key, utcnow(), owner)
    return key is not None
