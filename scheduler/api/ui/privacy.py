"""The agent page's review queue and forget sections: what they read of an agent, as plain data for the templates
(`sections/review.html`, `sections/forget.html`), which escape all of it. Their forms are in `privacy_forms`.

The review queue lists what `memory.review: required` holds (`GET …/memory/review`, the API's `review_list`); the
forget section shows the muted topics (`change_topics`) and, right after a forget, its report: counts only, never
the text it removed.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pagemind.runtime.agent import Agent
from pagemind.runtime.forgetting.report import ForgetReport
from pagemind.runtime.state.off_loop import off_loop
from pagemind.scheduler.api.privacy.forgetting import change_topics
from pagemind.scheduler.api.privacy.review import review_list
from pagemind.scheduler.api.ui.views import PageQuery

# What a form just did, as the page says it (`?done=WORD` after the form's redirect; any other word says nothing).
DONE = {
    "approved": "Approved: the memory is now in archival memory.",
    "pinned": "Approved and pinned: the memory is in archival memory and never decays, expires or is superseded.",
    "rejected": "Rejected: the memory is gone for good.",
    "muted": "Muted: whatever touches the topic is left out of what the agent is shown.",
    "already-muted": "That topic was muted already.",
    "unmuted": "Unmuted.",
    "not-muted": "That topic was not muted.",
}
REVIEW_DONE = ("approved", "pinned", "rejected")


@dataclass(frozen=True)
class PendingView:
    """One memory waiting for review, and what the page's form last sent for it when that was refused."""

    id: str
    origin: str
    text: str
    kind: str
    importance: float | None
    tags: list[str]
    at: str
    value: str  # what the form's text box holds: the text, or a refused edit
    error: str = ""


@dataclass(frozen=True)
class ReviewView:
    """The review queue: whether the agent has one (archival memory), which writes wait, what waits."""

    enabled: bool
    required: list[str] = field(default_factory=list)
    pending: list[PendingView] = field(default_factory=list)
    done: str = ""


@dataclass(frozen=True)
class ForgetView:
    """The forget form (a refused query kept in it, with why), the report of the forget just made, the muted
    topics (None: the agent keeps no memory a topic could be muted in) and the mute form's state."""

    query: str = ""
    error: str = ""
    report: ForgetReport | None = None
    topics: list[str] | None = None
    topic: str = ""
    mute_error: str = ""
    done: str = ""


def _refused(query: PageQuery, form: str) -> tuple[str, str]:
    """(why, value sent) when the request's refused form is `form`, else ("", "")."""
    refused = query.refused
    return (refused.why, refused.value) if refused is not None and refused.form == form else ("", "")


async def build_review(agent: Agent, query: PageQuery) -> ReviewView:
    """The memories waiting for review, oldest first (as `GET …/memory/review` lists them)."""
    if agent.review_queue is None:
        return ReviewView(enabled=False)
    listed = await off_loop(agent.store.engine, review_list, agent)
    pending = []
    for item in listed.pending:
        why, value = _refused(query, f"review:{item.id}")
        pending.append(
            PendingView(
                id=item.id,
                origin=item.origin,
                text=item.text,
                kind=item.kind,
                importance=item.importance,
                tags=list(item.tags),
                at=f"{item.created_at:%Y-%m-%d %H:%M}",
                value=value if why else item.text,
                error=why,
            )
        )
    done = DONE[query.done] if query.done in REVIEW_DONE else ""
    return ReviewView(True, listed.required, pending, done)


async def build_forget(agent: Agent, query: PageQuery) -> ForgetView:
    """The forget form's state, the report of a forget just made, and the muted topics."""
    why, sent = _refused(query, "forget")
    mute_why, topic = _refused(query, "mute")
    topics = None
    if agent.forgetting.mutes is not None:
        topics = (await off_loop(agent.store.engine, change_topics, agent)).topics
    done = DONE[query.done] if query.done in DONE and query.done not in REVIEW_DONE else ""
    return ForgetView(sent, why, query.forgotten, topics, topic, mute_why, done)
