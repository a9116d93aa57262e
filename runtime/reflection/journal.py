"""The `reflections` table: one row per reflection of an agent (the only code that reads or writes it).

A row is written `running` when a reflection starts; once the model's answer validates it becomes `applying`
with that plan stored, before any change is made, so a rerun after a crash applies the same plan (every change
is idempotent) instead of asking the model again; then `done` with its counts. `invalid` (the answer was
unusable: nothing applied) and `failed` (the model call failed, or the request did not fit its budget) end a
reflection without changes. What comes "since the last reflection" is after the newest message that a `done`
reflection covered (a reflection with nothing new to look at records nothing).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.engine import Engine

from pagemind.runtime.state.records import aware
from pagemind.runtime.state.tables.memory import reflections

RUNNING, APPLYING, DONE, INVALID, FAILED = "running", "applying", "done", "invalid", "failed"


@dataclass(frozen=True)
class ReflectionRow:
    """One reflection as recorded."""

    id: str
    agent_id: int
    started_at: datetime
    last_message_id: int
    status: str
    counts: dict[str, int] = field(default_factory=dict)
    plan: dict[str, Any] | None = None
    finished_at: datetime | None = None
    error: str | None = None


def _row(data: Any) -> ReflectionRow:
    return ReflectionRow(
        id=data["id"],
        agent_id=data["agent_id"],
        started_at=aware(data["started_at"]),
        last_message_id=int(data["last_message_id"]),
        status=data["status"],
        counts=dict(data["counts"] or {}),
        plan=data["plan"],
        finished_at=aware(data["finished_at"]) if data["finished_at"] else None,
        error=data["error"],
    )


class Journal:
    """One agent's reflections."""

    def __init__(self, engine: Engine, agent_id: int):
        self.engine = engine
        self.agent_id = agent_id

    def last_done(self) -> ReflectionRow | None:
        """The newest done reflection (its messages are reflected on), if any."""
        return self._newest(reflections.c.status == DONE)

    def newest(self) -> ReflectionRow | None:
        """The newest reflection of the agent, whatever its outcome."""
        return self._newest(reflections.c.id.is_not(None))

    def unfinished(self) -> ReflectionRow | None:
        """The newest reflection left `applying` (a crash or an error in the middle of applying its plan)."""
        return self._newest(reflections.c.status == APPLYING)

    def all(self) -> list[ReflectionRow]:
        """Every reflection of the agent, oldest first."""
        query = select(reflections).where(reflections.c.agent_id == self.agent_id)
        with self.engine.connect() as conn:
            return [
                _row(r) for r in conn.execute(query.order_by(reflections.c.started_at, reflections.c.id)).mappings()
            ]

    def _newest(self, condition: Any) -> ReflectionRow | None:
        query = (
            select(reflections)
            .where(reflections.c.agent_id == self.agent_id, condition)
            .order_by(reflections.c.started_at.desc(), reflections.c.id.desc())
            .limit(1)
        )
        with self.engine.connect() as conn:
            found = conn.execute(query).mappings().first()
        return _row(found) if found else None

    def start(self, reflection_id: str, started_at: datetime, last_message_id: int) -> None:
        """Record a reflection as running; reflections an earlier process left running are abandoned (failed)."""
        with self.engine.begin() as conn:
            conn.execute(
                update(reflections)
                .where(reflections.c.agent_id == self.agent_id, reflections.c.status == RUNNING)
                .values(status=FAILED, error="abandoned: the process stopped before the model answered")
            )
            conn.execute(
                reflections.insert(),
                [
                    {
                        "id": reflection_id,
                        "agent_id": self.agent_id,
                        "started_at": started_at,
                        "last_message_id": last_message_id,
                        "status": RUNNING,
                        "counts": {},
                    }
                ],
            )

    def plan(self, reflection_id: str, plan: dict[str, Any]) -> None:
        """The validated plan, stored before any of it is applied."""
        self._set(reflection_id, status=APPLYING, plan=plan)

    def finish(
        self,
        reflection_id: str,
        status: str,
        at: datetime,
        counts: dict[str, int] | None = None,
        error: str | None = None,
    ) -> None:
        """End a reflection: its status, counts and error (the plan is dropped once done: the changes carry it)."""
        values: dict[str, Any] = {"status": status, "finished_at": at, "counts": counts or {}, "error": error}
        if status == DONE:
            values["plan"] = None
        self._set(reflection_id, **values)

    def note_error(self, reflection_id: str, error: str) -> None:
        """Keep an error on a reflection that stays as it is (one left applying, to be resumed)."""
        self._set(reflection_id, error=error)

    def _set(self, reflection_id: str, **values: Any) -> None:
        with self.engine.begin() as conn:
            conn.execute(
                update(reflections)
                .where(reflections.c.agent_id == self.agent_id, reflections.c.id == reflection_id)
                .values(**values)
            )
