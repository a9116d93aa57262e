"""Episodes: each ended session becomes an `episode` memory, and episodes fade with age (resolution decay).

    summary = await end_session(agent)   # at session end (the daemon's idle trigger); safe to run twice

A **session** is a run of messages with no gap longer than `memory.advanced.session_gap_hours` (the same
rule recall memory uses to key a message with the one before it). The sessions since the newest episode's last
message (the last of them taken as ended: the caller runs this at session end; messages that come later start the
next episode) are summarised, oldest first, at most `max_sessions_per_run` a run, by the summarizer model
(`Agent.summarize`: the recursive summary's prompt and chunking) into one archival memory each, of kind `episode`:

- dated at the session's **start** (`created_at`), so `archival_search(start_date=…, end_date=…)` over the
  session's day finds it; its start, end and message count are in the 'insert' version's detail, its messages in
  `source_message_ids`;
- with an id derived from the agent and the session's first message, and written only if no episode covers the
  session yet: a rerun (a daemon killed mid-job) never makes two;
- not made for chit-chat: a session whose user messages hold fewer than `memory.episodes.min_session_words` words
  (each CJK character counts as one) yields nothing. The salience gate may replace this rule later.

**Fading** (`fade_episodes`, run by `end_session`): an episode older than a tier's `after_days` (from its start)
and longer than the tier's `max_tokens` is re-summarised to at most that many tokens (defaults: 7 days → 256,
30 days → 64). The model's answer is cut to the budget by tokens when it runs over. The memory keeps its id; its
text is rewritten in place (`ArchivalService.rewrite`) with a version of operation `faded` and detail
`{"resolution": max_tokens, "previous_tokens": n}`. An episode already within its tier's budget is left alone, so
fading runs once per tier. The session's full text stays in recall memory, which is what `conversation_search`
returns for that period.

A model failure or an empty answer changes nothing and is logged; the episodes after a session that failed wait
for the next run, so no session is ever skipped over.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import Any, Protocol

import structlog

from pagemind.runtime.memory.archival.memory import ArchivalService
from pagemind.runtime.memory.vectors.records import MemoryRecord
from pagemind.runtime.messages import Message
from pagemind.runtime.model.client import ModelError, ModelRequest, ModelResponse
from pagemind.runtime.process.crashpoints import crash_point
from pagemind.runtime.spec.agent import AgentSpec
from pagemind.runtime.spec.memory import EpisodesConfig, EpisodeTier
from pagemind.runtime.state.records import AgentRecord
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.tokens import DEFAULT_ENCODING, count_tokens, encoding
from pagemind.tools import ArchivalMemory

log = structlog.get_logger("pagemind.episodes")

EPISODE = "episode"
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_WORD = re.compile(rf"[{_CJK}]|[^\W_{_CJK}]+")

FADE_INSTRUCTIONS = """\
You keep an AI agent's long-term memory of past conversations with a user. Below is the memory of one earlier \
conversation (an episode), and it is getting old. Rewrite it shorter, in at most {budget} tokens: keep what will \
still matter later (what happened, decisions, people, feelings, names, numbers and dates copied verbatim) and drop \
how the conversation went. The full conversation stays searchable with conversation_search. Reply with the \
shortened memory only."""


class EpisodeAgent(Protocol):
    """What episodes need of the agent (`runtime.agent.Agent` has it all)."""

    spec: AgentSpec
    record: AgentRecord
    store: StateStore
    archival: ArchivalMemory | None

    @property
    def clock(self) -> Callable[[], datetime]:
        """The agent's clock (read only: a dataclass's callable field reads as read-only to a type checker)."""
        ...

    async def call_model(self, request: ModelRequest, step: int) -> ModelResponse:
        """One model call, seen by the agent's observers."""

    async def summarize(self, messages: Sequence[Message], budget: int, model: str | None = None) -> str:
        """A summary of `messages` in at most `budget` tokens by the summarizer model."""


# -- sessions ---------------------------------------------------------------------------------------------------


def split_sessions(messages: Sequence[Message], gap: timedelta) -> list[list[Message]]:
    """Consecutive messages, in order, grouped into sessions: a new one starts after a silence longer than `gap`."""
    sessions: list[list[Message]] = []
    for message in messages:
        if not sessions or message.created_at - sessions[-1][-1].created_at > gap:
            sessions.append([])
        sessions[-1].append(message)
    return sessions


def user_words(session: Sequence[Message]) -> int:
    """Words in the session's user messages (runs of letters or digits; each CJK character counts as one)."""
    return sum(len(_WORD.findall(m.content or "")) for m in session if m.role == "user")


def episode_id(agent_id: int, first_message_id: int) -> str:
    """The id of the episode of the session that starts with this message (the same on every run)."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"pagemind:episode:{agent_id}:{first_message_id}"))


def _episodes(archival: ArchivalService) -> list[MemoryRecord]:
    return [m for m in archival.list(include_superseded=True) if m.kind == EPISODE]


def pending_sessions(agent: EpisodeAgent, archival: ArchivalService) -> list[list[Message]]:
    """The sessions after the newest episode's last message, oldest first."""
    after = max((i for m in _episodes(archival) for i in m.source_message_ids), default=0)
    messages = agent.store.messages_after(agent.record.id, after)
    return split_sessions(messages, timedelta(hours=agent.spec.memory.session_gap_hours))


# -- session end ------------------------------------------------------------------------------------------------


async def end_session(agent: EpisodeAgent) -> dict[str, Any]:
    """Turn the sessions that ended since the last episode into `episode` memories, then fade old episodes.
    Safe to run twice (a session never yields two episodes). Returns what it did, for the log."""
    config = agent.spec.memory.episodes
    archival = agent.archival
    if not config.enabled or not isinstance(archival, ArchivalService):
        log.info("episodes_skipped", agent=agent.record.name, reason="disabled or no archival memory")
        return {"episodes": 0, "skipped": "disabled" if not config.enabled else "no archival memory"}
    await asyncio.to_thread(lambda: archival.store)  # reconciled first: a half-written episode is settled
    sessions = await asyncio.to_thread(pending_sessions, agent, archival)
    made: list[str] = []
    chit_chat, failed = 0, None
    for session in sessions[: config.max_sessions_per_run]:
        if user_words(session) < config.min_session_words:
            chit_chat += 1
            log.info(
                "episode_not_worth_keeping", agent=agent.record.name, first=session[0].id, words=user_words(session)
            )
            continue
        memory_id = await _make_episode(agent, archival, config, session)
        if memory_id is None:
            failed = session[0].id
            break  # a later episode would move the watermark past this session: wait for the next run
        made.append(memory_id)
    faded = await fade_episodes(agent)
    result = {
        "episodes": len(made),
        "episode_ids": made,
        "chit_chat": chit_chat,
        "sessions": len(sessions),
        "faded": faded["faded"],
    }
    if failed is not None:
        result["error"] = f"the session from message {failed} could not become an episode (retried next run)"
    return result


async def _make_episode(
    agent: EpisodeAgent, archival: ArchivalService, config: EpisodesConfig, session: list[Message]
) -> str | None:
    """The session's episode (its id), or None when the model failed or it could not be stored (logged)."""
    first, last = session[0], session[-1]
    assert first.id is not None and last.id is not None  # stored messages
    memory_id = episode_id(agent.record.id, first.id)
    spoken = [m for m in session if m.role in ("user", "assistant")]
    try:
        text = await agent.summarize(spoken, config.max_tokens, config.model)
    except (ModelError, ValueError) as exc:
        log.error("episode_failed", agent=agent.record.name, first=first.id, error=str(exc)[:300])
        return None
    crash_point("episodes.summarized")
    now = agent.clock()
    record = MemoryRecord(
        id=memory_id,
        agent_id=agent.record.id,
        text=text[: archival.config.max_memory_chars],
        kind=EPISODE,
        created_at=first.created_at,
        updated_at=now,
        source_message_ids=[m.id for m in session if m.id is not None],
    )
    detail = {
        "session_start": first.created_at.isoformat(),
        "session_end": last.created_at.isoformat(),
        "messages": len(session),
    }
    try:
        result = await archival.insert_event(record, detail)
    except ValueError as exc:
        log.error("episode_failed", agent=agent.record.name, first=first.id, error=str(exc)[:300])
        return None
    if result.action == "duplicate" and memory_id not in {m.id for m in _episodes(archival)}:
        log.warning("episode_unsettled", agent=agent.record.name, id=memory_id)  # another writer's, not yet live
        return None
    log.info(
        "episode",
        agent=agent.record.name,
        id=memory_id,
        action=result.action,
        messages=len(session),
        start=first.created_at.isoformat(),
        end=last.created_at.isoformat(),
    )
    return memory_id


# -- fading -----------------------------------------------------------------------------------------------------


def tier_for(age: timedelta, tiers: Sequence[EpisodeTier]) -> EpisodeTier | None:
    """The oldest tier an episode of this age has reached (tiers sorted by `after_days`), or None."""
    reached = [t for t in tiers if age >= timedelta(days=t.after_days)]
    return reached[-1] if reached else None


def within_tokens(text: str, limit: int, encoding_name: str) -> str:
    """`text` cut to at most `limit` tokens (never through a character)."""
    enc = encoding(encoding_name)
    tokens = enc.encode(text, disallowed_special=())
    if len(tokens) <= limit:
        return text
    cut = limit
    while cut > 0:
        head = enc.decode(tokens[:cut]).rstrip("\ufffd").rstrip()
        if count_tokens(head, encoding_name) <= limit:
            return head
        cut -= 1
    return ""


def fade_request(model: str, record: MemoryRecord, budget: int) -> ModelRequest:
    """The summarizer's request to shorten one episode to `budget` tokens."""
    return ModelRequest(
        model=model,
        messages=[
            {"role": "system", "content": FADE_INSTRUCTIONS.format(budget=budget)},
            {"role": "user", "content": f"Episode of {record.created_at:%Y-%m-%d}:\n{record.text}"},
        ],
        tools=[],
        temperature=0.0,
        max_tokens=budget,
        purpose="summarize",
    )


async def fade_episodes(agent: EpisodeAgent) -> dict[str, Any]:
    """Re-summarise every live episode longer than its age tier allows to that tier's budget, in place (operation
    `faded`). Idempotent: an episode within its budget is left alone. Returns what it did, for the log."""
    config = agent.spec.memory.episodes
    archival = agent.archival
    if not config.enabled or not isinstance(archival, ArchivalService):
        return {"faded": 0}
    spec = agent.spec
    encoding_name = spec.model.encoding or DEFAULT_ENCODING
    model = config.model or spec.memory.summarizer_model or spec.model.name
    now = agent.clock()
    faded, failed = 0, 0
    for record in await asyncio.to_thread(archival.list):
        tier = tier_for(now - record.created_at, config.tiers) if record.kind == EPISODE else None
        tokens = count_tokens(record.text, encoding_name) if tier else 0
        if tier is None or tokens <= tier.max_tokens:
            continue
        if await _fade(agent, archival, record, tier.max_tokens, tokens, model, encoding_name):
            faded += 1
        else:
            failed += 1
    if faded or failed:
        log.info("episodes_faded", agent=agent.record.name, faded=faded, failed=failed)
    return {"faded": faded, "failed": failed}


async def _fade(
    agent: EpisodeAgent,
    archival: ArchivalService,
    record: MemoryRecord,
    budget: int,
    tokens: int,
    model: str,
    encoding_name: str,
) -> bool:
    try:
        response = await agent.call_model(fade_request(model, record, budget), 0)
    except ModelError as exc:
        log.error("episode_fade_failed", agent=agent.record.name, id=record.id, error=str(exc)[:300])
        return False
    text = within_tokens(" ".join((response.content or "").split()), budget, encoding_name)
    if not text:
        log.error("episode_fade_failed", agent=agent.record.name, id=record.id, error="empty answer")
        return False
    crash_point("episodes.fade_answered")
    done = await archival.rewrite(
        record.id, text, operation="faded", detail={"resolution": budget, "previous_tokens": tokens}
    )
    log.info(
        "episode_faded",
        agent=agent.record.name,
        id=record.id,
        resolution=budget,
        previous_tokens=tokens,
        tokens=count_tokens(text, encoding_name),
        rewritten=done,
    )
    return done
