"""The conversation a memory was filed from, as extra words for its keyword index (never shown in results).

A memory is one sentence the model wrote ("Mei moved to Oslo"); the user's words around it ("my sister just moved
to Norway, the fjords are amazing") are often what a later question repeats. The write path records the messages
a memory was filed from in `source_message_ids` (the tool: the latest messages before the call; extraction: the
evicted messages; episodes: the session), and the BM25 half indexes the text of the first `context_messages` of
them (the earliest ids: what it was first filed from, which a later refresh adding ids does not change), clipped
to `context_chars` each, beside the memory's own words. The dense vector, the dedupe decision and what results
show stay the memory's own text. The context is read from the `messages` table, the record, so a point rebuilt
from SQL (`memory.reconcile`, a re-embed) gets the same keywords back.

At search time, memories filed in sequence share part of their scores (`filed_together`), as recall adds part
of the next message's score to a message's.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

import numpy as np
from sqlalchemy import select
from sqlalchemy.engine import Engine
from sqlmodel import col

from pagemind.runtime.memory.vectors.records import MemoryRecord, to_epoch
from pagemind.runtime.state.tables.conversation import MessageRow


def context_texts(
    engine: Engine, agent_id: int, records: Sequence[MemoryRecord], messages: int, chars: int
) -> dict[str, str]:
    """{memory id: the text of its first `messages` source messages, each clipped to `chars`} for the records
    that have any (one read for all of them; messages of other agents never count)."""
    if messages <= 0:
        return {}
    wanted = {r.id: sorted(set(r.source_message_ids))[:messages] for r in records if r.source_message_ids}
    ids = {i for some in wanted.values() for i in some}
    if not ids:
        return {}
    with engine.connect() as conn:
        rows = conn.execute(
            select(col(MessageRow.id), col(MessageRow.content)).where(
                col(MessageRow.agent_id) == agent_id, col(MessageRow.id).in_(sorted(ids))
            )
        ).all()
    text = {r.id: (r.content or "")[:chars] for r in rows}
    return {memory: " ".join(text[i] for i in some if text.get(i)) for memory, some in wanted.items()}


def filed_together(
    scores: np.ndarray, filed_at: Sequence[datetime], window_seconds: float, weight: float
) -> np.ndarray:
    """Each candidate's score plus `weight` × the better score of the candidates filed just before and just after
    it, when filed within `window_seconds` of it: memories filed in sequence come from one stretch of conversation,
    and a question's words are often split across them (recall shares the next message's score the same way).
    Only the candidates a search already holds take part: no read."""
    if not weight or len(scores) < 2:
        return scores
    moments = np.array([to_epoch(t) or 0.0 for t in filed_at])
    order = np.argsort(moments, kind="stable")
    ordered = scores[order]
    close = np.diff(moments[order]) <= window_seconds
    shared = np.zeros_like(ordered)
    shared[:-1] = np.where(close, ordered[1:], 0.0)  # the next one's score
    shared[1:] = np.maximum(shared[1:], np.where(close, ordered[:-1], 0.0))  # or the previous one's
    out = np.empty_like(scores)
    out[order] = ordered + weight * shared
    return out
