"""Checking a reflection's plan against what it was shown, and applying it, each change idempotent.

`validate` refuses the whole plan (OutputError, nothing applied) when it names a memory the request did not
offer, gives one memory two roles (kept in one change and retired in another: applied in order that could retire
both), marks done a memory that is no todo or progress item, or carries a profile patch that cannot apply.

`apply_plan` makes the changes, each one recorded as a version with `reason` and `reflection_id` in its detail:
- a merge supersedes each dropped memory by the kept one; a contradiction each loser by the winner (never a delete);
- an insight becomes a `reflection` memory under an id derived from the reflection's id and its place in the plan;
- a done todo or progress item is superseded by a new `progress` memory, "Done (date): …", under a derived id
  (so it leaves default results, and what was finished stays findable);
- the profile patch is one block edit (`reflection.profile`).
Superseding what is already superseded changes nothing, a derived id that exists is not inserted again, and the
profile edit is found by its operation: a rerun of the same plan after a crash applies only what is missing.
"""

from __future__ import annotations

import uuid
from collections import Counter
from typing import Any

import structlog

from pagemind.blocks import BlockEditError
from pagemind.runtime.agent import Agent
from pagemind.runtime.memory.archival.memory import ArchivalService
from pagemind.runtime.memory.review import ReviewQueue
from pagemind.runtime.memory.vectors.records import PINNED, MemoryRecord
from pagemind.runtime.process.crashpoints import crash_point
from pagemind.runtime.reflection.profile import apply_profile_patch, patched_value
from pagemind.runtime.reflection.schema import OutputError, ReflectionOutput

log = structlog.get_logger("pagemind.reflection")

DONE_KINDS = ("todo", "progress")


def derived_id(reflection_id: str, role: str, index: int) -> str:
    """The id of the memory a reflection writes for its `index`-th insight or done item: the same on a rerun."""
    return str(uuid.uuid5(uuid.NAMESPACE_URL, f"pagemind:reflection:{reflection_id}:{role}:{index}"))


def validate(
    output: ReflectionOutput, offered: dict[str, MemoryRecord], agent: Agent, profile_label: str, max_chars: int
) -> None:
    """Raise OutputError when the plan cannot be applied as a whole (see the module docstring; an insight
    longer than `max_chars`, archival memory's limit, too)."""
    named = [(f"merges[{n}].keep", m.keep) for n, m in enumerate(output.merges)]
    named += [(f"merges[{n}].drop", i) for n, m in enumerate(output.merges) for i in m.drop]
    named += [(f"contradictions[{n}].winner", c.winner) for n, c in enumerate(output.contradictions)]
    named += [(f"contradictions[{n}].losers", i) for n, c in enumerate(output.contradictions) for i in c.losers]
    named += [(f"insights[{n}].source_ids", i) for n, s in enumerate(output.insights) for i in s.source_ids]
    named += [(f"done[{n}].id", d.id) for n, d in enumerate(output.done)]
    unknown = [f"{where}: {memory_id!r}" for where, memory_id in named if memory_id not in offered]
    if unknown:
        raise OutputError(f"unknown memory id(s), not among those offered: {'; '.join(unknown[:5])}")
    kept = {m.keep for m in output.merges} | {c.winner for c in output.contradictions}
    retired = (
        [i for m in output.merges for i in m.drop]
        + [i for c in output.contradictions for i in c.losers]
        + [d.id for d in output.done]
    )
    both = sorted(kept & set(retired)) + sorted(i for i, n in Counter(retired).items() if n > 1)
    if both:
        raise OutputError(f"memory id(s) given two roles (kept and retired, or retired twice): {', '.join(both)}")
    wrong = [f"{d.id} is a {offered[d.id].kind}" for d in output.done if offered[d.id].kind not in DONE_KINDS]
    if wrong:
        raise OutputError(f"done names memories that are not todo or progress items: {'; '.join(wrong)}")
    long = [f"insights[{n}] has {len(s.text)}" for n, s in enumerate(output.insights) if len(s.text) > max_chars]
    if long:
        raise OutputError(f"insight text over the {max_chars}-character limit: {'; '.join(long)}")
    if output.profile:
        try:
            patched_value(agent, profile_label, output.profile)
        except BlockEditError as exc:
            raise OutputError(f"the profile patch cannot apply: {exc}") from exc


async def apply_plan(
    agent: Agent, archival: ArchivalService, reflection_id: str, output: ReflectionOutput, profile_label: str
) -> dict[str, int]:
    """Make the plan's changes (see the module docstring); the counts of changes made by this call."""
    counts: Counter[str] = Counter()
    pinned = _pinned(archival, output)  # never superseded by reflection (`memory.review`)
    review = agent.review_queue if agent.review_queue is not None and agent.review_queue.holds("reflection") else None
    for merge in output.merges:
        for memory_id in [i for i in merge.drop if i not in pinned]:
            note = {"reason": merge.reason, "reflection_id": reflection_id, "action": "merge"}
            counts["merged"] += await archival.supersede(memory_id, merge.keep, note)
            crash_point("reflection.applied")
    for resolution in output.contradictions:
        for memory_id in [i for i in resolution.losers if i not in pinned]:
            note = {"reason": resolution.reason, "reflection_id": reflection_id, "action": "contradiction"}
            counts["resolved"] += await archival.supersede(memory_id, resolution.winner, note)
            crash_point("reflection.applied")
    for n, insight in enumerate(output.insights):
        if review is not None:  # held for a person's review under its derived id (a rerun holds it once)
            await review.hold(
                "reflection",
                insight.text,
                kind="reflection",
                importance=insight.importance,
                review_id=derived_id(reflection_id, "insight", n),
            )
            counts["held"] += 1
            continue
        counts["insights"] += await _insight(
            archival, reflection_id, n, insight.text, insight.importance, insight.source_ids
        )
        crash_point("reflection.applied")
    for n, done in enumerate(output.done):
        if done.id in pinned:
            continue
        if review is not None:
            counts["held"] += await _hold_done(archival, review, reflection_id, n, done.id)
            continue
        counts["done"] += await _done(archival, reflection_id, n, done.id, done.reason)
        crash_point("reflection.applied")
    if output.profile:
        try:
            counts["profile"] += apply_profile_patch(agent, profile_label, output.profile, reflection_id)
        except BlockEditError as exc:  # only on a rerun: the block changed since the plan was checked
            log.warning("reflection_profile_skipped", agent=agent.name, reflection_id=reflection_id, error=str(exc))
    return {key: count for key, count in counts.items() if count}


async def _insert(
    archival: ArchivalService,
    memory_id: str,
    text: str,
    kind: str,
    importance: float,
    message_ids: list[int],
    detail: dict[str, Any],
) -> bool:
    """A memory under a derived id, as given (no dedupe: the plan decided); False when that id is stored already."""
    now = archival.clock()
    record = MemoryRecord(
        id=memory_id,
        agent_id=archival.agent_id,
        text=text,
        kind=kind,
        importance=importance,
        created_at=now,
        updated_at=now,
        source_message_ids=message_ids,
    )
    return (await archival.insert_event(record, detail)).action == "inserted"


async def _insight(
    archival: ArchivalService, reflection_id: str, n: int, text: str, importance: float, source_ids: list[str]
) -> bool:
    sources = archival.ledger.rows(source_ids) if source_ids else []
    message_ids = sorted({i for row in sources for i in row["source_message_ids"] or []})
    detail: dict[str, Any] = {"reason": "insight", "reflection_id": reflection_id, "source_ids": source_ids}
    return await _insert(
        archival, derived_id(reflection_id, "insight", n), text, "reflection", importance, message_ids, detail
    )


async def _done(archival: ArchivalService, reflection_id: str, n: int, memory_id: str, reason: str) -> bool:
    rows = archival.ledger.rows([memory_id])
    if not rows:
        return False  # forgotten since the plan was made
    old = rows[0]
    note = {"reason": reason, "reflection_id": reflection_id, "action": "done", "done": old["id"]}
    text = f"Done ({archival.clock():%Y-%m-%d}): {old['text']}"[: archival.config.max_memory_chars]
    done_id = derived_id(reflection_id, "done", n)
    await _insert(archival, done_id, text, "progress", old["importance"], list(old["source_message_ids"] or []), note)
    return await archival.supersede(memory_id, done_id, note)


def _pinned(archival: ArchivalService, output: ReflectionOutput) -> set[str]:
    """The memories the plan would retire that are pinned."""
    named = {i for m in output.merges for i in m.drop} | {i for r in output.contradictions for i in r.losers}
    named |= {d.id for d in output.done}
    if not named:
        return set()
    return {row["id"] for row in archival.ledger.rows(sorted(named)) if PINNED in (row["tags"] or [])}


async def _hold_done(archival: ArchivalService, review: ReviewQueue, reflection_id: str, n: int, memory_id: str) -> int:
    """A done item's "Done" memory held for review; what it supersedes is retired when it is approved."""
    rows = archival.ledger.rows([memory_id])
    if not rows:
        return 0
    old = rows[0]
    text = f"Done ({archival.clock():%Y-%m-%d}): {old['text']}"[: archival.config.max_memory_chars]
    review_id = derived_id(reflection_id, "done", n)
    await review.hold(
        "reflection", text, kind="progress", importance=old["importance"], review_id=review_id, supersedes=memory_id
    )
    return 1
