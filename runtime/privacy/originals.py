"""The originals behind placeholders, for `privacy.keep_originals` (not wired yet: it needs encryption at rest).

One small interface, `OriginalsStore`, and its SQL form over `pii_originals` (`state.tables`), whose `value`
column the encryption at rest is to encrypt: `put` and `get` take and give plaintext; `SqlOriginals` is where
that work wraps `value` (encrypt in `put`, decrypt in `get`). Until then `PrivacyConfig` refuses
`keep_originals: true` and nothing writes here.
"""

from __future__ import annotations

from typing import Protocol

from sqlalchemy import delete, insert, select
from sqlalchemy.engine import Engine

from pagemind.runtime.state.tables import pii_originals


class OriginalsStore(Protocol):
    """What a placeholder stood for, per agent: written when a value is first redacted, read to fill a reply."""

    def put(self, agent_id: int, kind: str, number: int, value: str) -> None:
        """Keep the original of `[kind#number]`."""
        ...

    def get(self, agent_id: int, kind: str, number: int) -> str | None:
        """The original of `[kind#number]`, or None if it was not kept."""
        ...


class SqlOriginals:
    """`OriginalsStore` on the `pii_originals` table; `value` is the column encryption at rest must encrypt."""

    def __init__(self, engine: Engine):
        self.engine = engine

    def put(self, agent_id: int, kind: str, number: int, value: str) -> None:
        """Keep the original of `[kind#number]` (replacing any kept before)."""
        key = (pii_originals.c.agent_id == agent_id) & (pii_originals.c.kind == kind)
        with self.engine.begin() as conn:
            conn.execute(delete(pii_originals).where(key & (pii_originals.c.number == number)))
            row = {"agent_id": agent_id, "kind": kind, "number": number, "value": value}
            conn.execute(insert(pii_originals).values(**row))

    def get(self, agent_id: int, kind: str, number: int) -> str | None:
        """The original of `[kind#number]`, or None."""
        query = select(pii_originals.c.value).where(
            (pii_originals.c.agent_id == agent_id) & (pii_originals.c.kind == kind) & (pii_originals.c.number == number)
        )
        with self.engine.connect() as conn:
            value = conn.execute(query).scalar()
        return None if value is None else str(value)
