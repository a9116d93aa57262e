"""A new agent's first rows as Core statements, in a transaction the caller owns.

`StateStore.ensure_agent` creates or updates an agent through ORM objects in a transaction of its own: a read of
the agent, its insert, a read of its blocks, their inserts (about a dozen round trips on Postgres). A daemon that
makes agents for its users (one per end user, thousands at a time) knows the agent is new and has a row of its
own to add in the same commit (`scheduler.catalog`: the template it came from), so it writes the agent and every
block with two statements here and commits once. A name that is taken fails the insert with `IntegrityError`;
the caller rolls back and takes the slow path, which tells a half-made agent of its own from someone else's.
"""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import insert
from sqlalchemy.engine import Connection

from pagemind.runtime.spec.agent import AgentSpec
from pagemind.runtime.state.records import AgentRecord, aware
from pagemind.runtime.state.tables.agents import AgentRow, BlockRow
from pagemind.runtime.state.tables.schema import table_of

_agents, _blocks = table_of(AgentRow), table_of(BlockRow)
_INSERT_AGENT = insert(_agents).returning(_agents.c.id, _agents.c.created_at)


def insert_agent(conn: Connection, spec: AgentSpec, now: datetime, owner: str | None = None) -> AgentRecord:
    """Insert the agent named in `spec` and its blocks (seeded from the spec) on `conn`, belonging to `owner` (an
    end user's id, `state.keys`); not committed. Raises `IntegrityError` when the name is taken."""
    spec_hash = spec.spec_hash()
    row = conn.execute(
        _INSERT_AGENT,
        {
            "name": spec.name,
            "spec_hash": spec_hash,
            "spec_json": spec.model_dump_json(),
            "summary": "",
            "pressure_warned": False,
            "token_correction": 1.0,
            "created_at": now,
            "updated_at": now,
            "owner": owner,
        },
    ).one()
    if spec.blocks:
        conn.execute(
            insert(_blocks),
            [
                {
                    "agent_id": row.id,
                    "label": b.label,
                    "value": b.value,
                    "char_limit": b.limit,
                    "description": b.description,
                    "read_only": b.read_only,
                    "updated_at": now,
                    "version": 0,
                }
                for b in spec.blocks
            ],
        )
    return AgentRecord(row.id, spec.name, spec_hash, "", aware(row.created_at), aware(now), owner=owner)
