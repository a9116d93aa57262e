"""A `MemoryFilter` as Qdrant Edge takes it: the embedded store's conditions, always scoped to the agent.

The server backend translates the same filter for qdrant-client (`memory.vectors.server`): the two clients'
condition types differ.
"""

from __future__ import annotations

import uuid
from typing import Any

from pagemind.runtime.memory.vectors.records import PINNED, MemoryFilter, tenant_key, to_epoch


def to_edge_filter(agent_id: int, flt: MemoryFilter) -> Any:
    """The store filter as Qdrant Edge takes it, always scoped to the agent."""
    from qdrant_edge import FieldCondition, Filter, HasIdCondition, IsEmptyCondition, MatchAny, MatchValue, RangeFloat

    must: list[Any] = [FieldCondition(key="agent_id", match=MatchValue(tenant_key(agent_id)))]
    must_not: list[Any] = []
    if flt.ids is not None:
        must.append(HasIdCondition({uuid.UUID(i) for i in flt.ids}))
    if flt.user_id is not None:
        must.append(FieldCondition(key="user_id", match=MatchValue(flt.user_id)))
    if flt.kinds:
        must.append(FieldCondition(key="kind", match=MatchAny(list(flt.kinds))))
    if flt.tags:
        must.append(FieldCondition(key="tags", match=MatchAny(list(flt.tags))))
    if flt.created_from or flt.created_to:
        must.append(
            FieldCondition(
                key="created_at", range=RangeFloat(gte=to_epoch(flt.created_from), lte=to_epoch(flt.created_to))
            )
        )
    if flt.live_at is not None:
        must.append(IsEmptyCondition("superseded_by"))
        must_not.append(FieldCondition(key="expires_at", range=RangeFloat(lte=to_epoch(flt.live_at))))
    if flt.unsuperseded:
        must.append(IsEmptyCondition("superseded_by"))
    if flt.used_since is not None:  # last use: the later of the last hit and the last write (`last_used`)
        since = to_epoch(flt.used_since)
        must.append(
            Filter(
                should=[
                    FieldCondition(key="last_hit_at", range=RangeFloat(gte=since)),
                    FieldCondition(key="updated_at", range=RangeFloat(gte=since)),
                    FieldCondition(key="tags", match=MatchAny([PINNED])),  # pinned: never dormant
                ]
            )
        )
    return Filter(must=must, must_not=must_not or None)
