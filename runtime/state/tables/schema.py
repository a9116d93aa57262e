"""The whole schema as one `MetaData`: every table module of `state.tables` loaded, so `metadata` holds every
table (what a migration's autogenerate compares with the head, and what key rotation and erasure walk).

A table registers itself in SQLModel's one `MetaData` when its module is imported; a foreign key names its table
(`agents.id`) and is resolved there when used, so whatever needs the whole schema reads it from here.
"""

from __future__ import annotations

from sqlalchemy import Table
from sqlmodel import SQLModel

from pagemind.runtime.state.tables import agents, archival, conversation, daemon, memory, security

metadata = SQLModel.metadata
# The modules whose tables `metadata` holds (imported for that: nothing else of them is used here).
TABLE_MODULES = (agents, conversation, archival, memory, daemon, security)


def table_of(row: type[SQLModel]) -> Table:
    """The Core table of a SQLModel table class (for statements that skip the ORM)."""
    table: Table = row.__table__  # type: ignore[attr-defined]  # every table class has one; SQLModel's stubs lack it
    return table
