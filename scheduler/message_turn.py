"""A message item run as its agent's turn: the turn, keyed by its item, its item's finish, and the reflection it
makes due.

The item's finish is one statement (`Inbox.finish`), committed in one of two places, a strategy chosen by
`DaemonConfig.finish_with_last_step`: on, it rides on the turn's last step's statement (`runtime.loop.EndWrite`),
so the turn's end and its item's are one commit and a turn costs one round trip less; off (or while a daemon in
another process watches the run: its relayed events are written before the item's end, `RunFanout.settle`), the
dispatcher runs it after the turn. A kill between the turn's last commit and a finish apart runs the item again,
and its key returns the stored turn (`runtime.loop.begin_turn`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from pagemind.runtime.agent import Agent
from pagemind.runtime.loop import StopReason, TurnEnd, run_turn
from pagemind.runtime.reflection.run import due_reflection
from pagemind.runtime.state.records import utcnow
from pagemind.runtime.state.step_commit import LinkedWrite
from pagemind.scheduler.queue.inbox import Inbox, InboxItem
from pagemind.scheduler.streams.fanout import RunFanout


def turn_result(turn_id: str, reply: str | None, stop_reason: StopReason, steps: int) -> dict[str, Any]:
    """A message item's `result`: what `GET /v1/runs/{id}` shows of its turn."""
    return {"reply": reply, "stop_reason": stop_reason.value, "steps": steps, "turn_id": turn_id}


class FinishWithLastStep:
    """A message item's finish, committed with its turn's last step (the module docstring), unless `enabled` is off
    or a daemon elsewhere watches the run."""

    def __init__(self, inbox: Inbox, fanout: RunFanout, owner: str, item: InboxItem, enabled: bool = True):
        self.inbox, self.fanout, self.owner, self.item, self.enabled = inbox, fanout, owner, item, enabled
        self.rider: LinkedWrite | None = None

    def __call__(self, end: TurnEnd) -> LinkedWrite | None:
        """The finish to commit with the last step, or None (finished apart)."""
        if not self.enabled or self.fanout.relayed(self.item.run_id):
            return None
        result = turn_result(end.turn_id, end.reply, end.stop_reason, end.steps)
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
    finish = FinishWithLastStep(inbox, fanout, owner, item, enabled=finish_with_last_step)
    # A first attempt's key is new: `attempts` counts every claim, committed before the turn runs.
    turn = await run_turn(
        agent,
        item.content,
        idempotency_key=item.turn_key,
        new_key=item.attempts == 1,
        accepted=item.accepted,
        on_end=finish,
    )
    if agent.forgetting.queued:  # the turn asked to forget: its messages and trace lines too (`runtime.forgetting`)
        await agent.forgetting.after_turn()
    finished = finish.outcome()
    if await queue_reflection(agent, item, inbox, owner) and finished is not None:
        finished = replace(finished, more=True)  # the job came after the finish: claim it next
    return turn_result(turn.turn_id, turn.reply, turn.stop_reason, turn.steps), finished


async def queue_reflection(agent: Agent, item: InboxItem, inbox: Inbox, owner: str) -> bool:
    """`memory.reflection.every_turns`: a `reflect` job behind this turn when one is due (serial with the agent's
    turns, off the user's path; keyed, so a job already waiting is not queued again). Returns whether one was due."""
    key = due_reflection(agent)
    if key is not None:
        await inbox.submit(agent.record.id, item.agent_name, "job", "reflect", key, utcnow(), owner)
    return key is not None
