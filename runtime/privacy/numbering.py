"""Where an agent's placeholder numbers are kept: the `pii_keys` and `pii_placeholders` tables
(`state.tables.security`).

Numbers are given in memory (`PlaceholderBook`) and stored before the redacted text goes anywhere; a process that
finds a number taken by another process meanwhile reads the book again and redoes its redaction
(`NumberTaken`), so two processes never give one number to two values.
"""

from __future__ import annotations

import base64
import secrets

from sqlalchemy import insert, select
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError

from pagemind.runtime.privacy.book import Entry, PlaceholderBook
from pagemind.runtime.state.off_loop import off_loop
from pagemind.runtime.state.tables.security import pii_keys, pii_originals, pii_placeholders


class NumberTaken(Exception):
    """Another process gave one of these numbers (or numbered one of these values) first."""


class SqlNumbering:
    """An agent's book as stored in its database."""

    def __init__(self, engine: Engine, agent_id: int, keep_originals: bool = False):
        self.engine = engine
        self.agent_id = agent_id
        self.keep_originals = keep_originals  # new numbers' values go to `pii_originals` (a sealed column) too

    async def load(self) -> PlaceholderBook:
        """The agent's book (its key made on first use)."""
        return await off_loop(self.engine, self._load)

    def _load(self) -> PlaceholderBook:
        key = self._key()
        with self.engine.connect() as conn:
            rows = conn.execute(
                select(pii_placeholders.c.kind, pii_placeholders.c.number, pii_placeholders.c.digest).where(
                    pii_placeholders.c.agent_id == self.agent_id
                )
            ).all()
        return PlaceholderBook(key, {row.digest: Entry(row.kind, row.number, row.digest) for row in rows})

    def _key(self) -> bytes:
        query = select(pii_keys.c.key).where(pii_keys.c.agent_id == self.agent_id)
        with self.engine.connect() as conn:
            key = conn.execute(query).scalar()
        if key is not None:
            return base64.b64decode(key)
        try:
            with self.engine.begin() as conn:
                fresh = secrets.token_bytes(32)
                # Text (sealed when the store is encrypted: with the key beside the hashes, guesses could be tested)
                conn.execute(insert(pii_keys).values(agent_id=self.agent_id, key=base64.b64encode(fresh).decode()))
                return fresh
        except IntegrityError:  # another process made the key first
            with self.engine.connect() as conn:
                return base64.b64decode(conn.execute(query).scalar_one())

    async def add(self, entries: list[Entry]) -> None:
        """Store new numbers; raises NumberTaken when another process stored one of them first."""
        await off_loop(self.engine, self._add, entries)

    def _add(self, entries: list[Entry]) -> None:
        rows = [{"agent_id": self.agent_id, "kind": e.kind, "number": e.number, "digest": e.digest} for e in entries]
        try:
            with self.engine.begin() as conn:
                conn.execute(insert(pii_placeholders), rows)
                if self.keep_originals:  # in the same transaction: a number is never kept without its original
                    kept = [{**row, "value": e.original} for row, e in zip(rows, entries, strict=True)]
                    conn.execute(insert(pii_originals), [{k: v for k, v in r.items() if k != "digest"} for r in kept])
        except IntegrityError as exc:
            raise NumberTaken(str(exc.orig)) from None

    async def originals(self) -> dict[tuple[str, int], str]:
        """The kept originals by (kind, number) (`privacy.keep_originals`)."""
        return await off_loop(self.engine, self._originals)

    def _originals(self) -> dict[tuple[str, int], str]:
        columns = (pii_originals.c.kind, pii_originals.c.number, pii_originals.c.value)
        with self.engine.connect() as conn:
            rows = conn.execute(select(*columns).where(pii_originals.c.agent_id == self.agent_id)).all()
        return {(row.kind, row.number): str(row.value) for row in rows}
