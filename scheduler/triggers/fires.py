"""What the trigger decisions read and write: `trigger_fires` (per agent and trigger key, the due time of the last
firing handled) and, from `inbox`, when each agent's last message ended.

A record only ever moves forward (an upsert guarded by `fired_at <`), so two daemon processes recording the same
firing, or an older decision arriving late, never move a trigger back to fire again.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from sqlalchemy import and_, func, or_, select
from sqlalchemy.engine import Engine

from pagemind.runtime.state.dialects import dialect
from pagemind.runtime.state.held import write_transaction
from pagemind.runtime.state.records import aware
from pagemind.runtime.state.tables.daemon import inbox, trigger_fires
from pagemind.scheduler.queue.inbox_item import MESSAGE_KINDS
from pagemind.scheduler.triggers.rules import IDLE_KEY_PREFIX

_CHUNK = 500  # agent ids per query (SQLite caps bound parameters; Postgres plans a short list better)


def _chunks(ids: Iterable[int]) -> Iterable[list[int]]:
    ids = sorted(set(ids))
    for start in range(0, len(ids), _CHUNK):
        yield ids[start : start + _CHUNK]


class TriggerFires:
    """Reads and writes `trigger_fires` (the only code that does) and reads agents' last activity from `inbox`."""

    def __init__(self, engine: Engine):
        self.engine = engine

    def fired(self, agent_ids: Iterable[int]) -> dict[int, dict[str, datetime]]:
        """Per agent, per trigger key: the due time of the last firing handled (agents without any are left out)."""
        found: dict[int, dict[str, datetime]] = {}
        with self.engine.connect() as conn:
            for chunk in _chunks(agent_ids):
                rows = conn.execute(select(trigger_fires).where(trigger_fires.c.agent_id.in_(chunk)))
                for agent_id, key, fired_at in rows:
                    found.setdefault(agent_id, {})[key] = aware(fired_at)
        return found

    def record(self, rows: Iterable[tuple[int, str, datetime]]) -> None:
        """Note, for each (agent id, trigger key, time), that the trigger was handled up to that time, all in one
        transaction; a later time already recorded is kept."""
        values = [{"agent_id": a, "trigger_key": k, "fired_at": at} for a, k, at in rows]
        if not values:
            return
        insert = dialect(self.engine).insert(trigger_fires)
        statement = insert.on_conflict_do_update(
            index_elements=[trigger_fires.c.agent_id, trigger_fires.c.trigger_key],
            set_={"fired_at": insert.excluded.fired_at},
            where=trigger_fires.c.fired_at < insert.excluded.fired_at,
        )
        with write_transaction(self.engine) as conn:
            conn.execute(statement, values)

    def last_activity(self, agent_ids: Iterable[int], now: datetime) -> dict[int, datetime]:
        """Per agent, when its last message ended — `now` if one is pending or running; agents that never had one
        are left out. Jobs and the messages idle triggers sent do not count: they would re-arm the idle trigger
        that caused them."""
        activity: dict[int, datetime] = {}
        counted = and_(
            inbox.c.kind.in_(MESSAGE_KINDS),
            or_(inbox.c.idempotency_key.is_(None), ~inbox.c.idempotency_key.like(f"trigger:{IDLE_KEY_PREFIX}%")),
        )
        with self.engine.connect() as conn:
            for chunk in _chunks(agent_ids):
                latest = (
                    select(func.max(inbox.c.id).label("id"))
                    .where(inbox.c.agent_id.in_(chunk), counted)
                    .group_by(inbox.c.agent_id)
                    .subquery()
                )
                rows = conn.execute(
                    select(inbox.c.agent_id, inbox.c.state, inbox.c.finished_at).join(latest, latest.c.id == inbox.c.id)
                )
                for agent_id, state, finished_at in rows:
                    activity[agent_id] = (
                        now if finished_at is None or state in ("pending", "running") else aware(finished_at)
                    )
        return activity
