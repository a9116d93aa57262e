"""Old names of spec fields, still read for one release: the renames, their translation, and the warning.

Issue #32 ("Configuration in tiers") moved the tuning knobs of `memory:` under `memory.advanced` and renamed the
ones whose names collided (three different things were called `prefetch`, two `extraction`, and a recall knob
under `archival` decided where episodes split). A YAML file that writes an old name still loads and behaves as
before; each old name is logged once per process (`spec_field_renamed`, with the file, line and the new name).

Stored specs (`agents.spec_json`) and trace headers are full dumps in the old shape, and `spec_hash` is unchanged
by the move (`spec.fingerprint`), so a stored spec is never rewritten: their translation must stay after the YAML
names go, or a migration must rewrite them first.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

import structlog
from pydantic import BaseModel

log = structlog.get_logger(__name__)

# (old path, new path), as a YAML file spells them.
RENAMED: tuple[tuple[str, str], ...] = (
    ("memory.prefetch_top_k", "memory.memories_per_turn"),
    ("memory.pressure", "memory.advanced.pressure"),
    ("memory.budgets", "memory.advanced.budgets"),
    ("memory.extraction", "memory.advanced.extraction"),
    ("memory.archival", "memory.advanced.archival"),
    ("memory.salience", "memory.advanced.salience"),
    ("memory.episodes", "memory.advanced.episodes"),
    ("memory.reflection", "memory.advanced.reflection"),
    ("memory.advanced.archival.recall_session_gap_hours", "memory.advanced.session_gap_hours"),
    ("memory.advanced.archival.prefetch", "memory.advanced.archival.candidates"),
    ("memory.advanced.salience.prefetch", "memory.advanced.salience.gate_lookup"),
    ("memory.advanced.salience.extraction", "memory.advanced.salience.gate_extraction"),
)
# Fields that are gone, as a YAML file spells them, with why: still accepted (and ignored) for one release, each
# logged as `spec_field_removed`. Stored specs and trace headers hold them too, so they are always accepted.
REMOVED: dict[str, str] = {
    "memory.advanced.budgets.system": "it was never enforced; the system prompt is the YAML's own text",
    "memory.advanced.budgets.core": "it was never enforced; each block's `limit` bounds the core blocks",
}
SECTIONS = ("pressure", "budgets", "extraction", "archival", "salience", "episodes", "reflection")
ARCHIVAL_RENAMES = {"prefetch": "candidates"}
SALIENCE_RENAMES = {"prefetch": "gate_lookup", "extraction": "gate_extraction"}

_collected: ContextVar[list[tuple[str, str]] | None] = ContextVar("pagemind_spec_renamed", default=None)
_warned: set[tuple[str | None, str | None, str]] = set()


def note(old: str, new: str) -> None:
    """An old name was read: collected while an `AgentSpec` validates (it logs them with the file), else logged."""
    collected = _collected.get()
    if collected is not None:
        collected.append((old, new))
    else:
        warn(old, new)


@contextmanager
def collecting() -> Iterator[list[tuple[str, str]]]:
    """The old names read inside the block, for the caller to log with what it knows (file, line, agent)."""
    found: list[tuple[str, str]] = []
    token = _collected.set(found)
    try:
        yield found
    finally:
        _collected.reset(token)


def dropped_keys(data: Any, where: str) -> Any:
    """A section's input without its removed keys (`REMOVED`, under `where`), each noted."""
    if not isinstance(data, dict):
        return data
    gone = [key for key in data if f"{where}.{key}" in REMOVED]
    for key in gone:
        note(f"{where}.{key}", "")
    return {key: value for key, value in data.items() if key not in gone} if gone else data


def warn(old: str, new: str, *, file: str | None = None, line: int | None = None, agent: str | None = None) -> None:
    """Log that `old` was read where `new` is now meant (`new` empty: a removed field, `REMOVED`), once per process
    for each file (or agent) and name."""
    key = (file, agent, old)
    if key in _warned:
        return
    _warned.add(key)
    if not new:
        hint = f"{old} is no longer read ({REMOVED.get(old, 'removed')}); delete it"
        log.warning("spec_field_removed", file=file, line=line, agent=agent, field=old, hint=hint)
        return
    log.warning(
        "spec_field_renamed",
        file=file,
        line=line,
        agent=agent,
        field=old,
        new=new,
        hint=f"{old} is read for one more release; write {new}",
    )


def renamed_keys(data: Any, renames: Mapping[str, str], where: str, new_where: str | None = None) -> Any:
    """A section's input with its old keys under their new names (each noted as `where.old`, the new name under
    `new_where`, default `where`); raises ValueError, naming the old key, when both names are given."""
    if not isinstance(data, dict) or not renames.keys() & data.keys():
        return data
    data = dict(data)
    for old, new in renames.items():
        if old in data:
            if new in data:
                raise ValueError(f"{old}: the old name of {new}, which is given too; keep {new} only")
            data[new] = data.pop(old)
            note(f"{where}.{old}", f"{new_where or where}.{new}")
    return data


def migrate_memory(data: Any) -> Any:
    """`memory:` as written before the tiers (or mixing old and new names), in today's shape; raises ValueError
    naming the field (relative to `memory`) when an old and a new name are both given."""
    if not isinstance(data, dict):
        return data
    data = renamed_keys(data, {"prefetch_top_k": "memories_per_turn"}, "memory")
    moved = [key for key in SECTIONS if key in data]
    advanced = data.get("advanced")
    if isinstance(advanced, BaseModel):
        advanced = advanced.model_dump()
    if advanced is None:
        advanced = {}
    if not isinstance(advanced, dict):
        return data  # not a mapping: validation says so
    data, advanced = dict(data), dict(advanced)
    for key in moved:
        if key in advanced:
            raise ValueError(f"{key}: the old place of advanced.{key}, which is given too; keep advanced.{key} only")
        advanced[key] = data.pop(key)
        note(f"memory.{key}", f"memory.advanced.{key}")
    place = {key: "memory" if key in moved else "memory.advanced" for key in ("archival", "salience")}
    if isinstance(advanced.get("archival"), dict):
        archival = _renamed_in(advanced["archival"], ARCHIVAL_RENAMES, place["archival"], "archival")
        if "recall_session_gap_hours" in archival:
            if "session_gap_hours" in advanced:
                raise ValueError(
                    f"{_relative(place['archival'])}archival.recall_session_gap_hours: the old name of "
                    "advanced.session_gap_hours, which is given too; keep advanced.session_gap_hours only"
                )
            archival = dict(archival)
            advanced["session_gap_hours"] = archival.pop("recall_session_gap_hours")
            note(f"{place['archival']}.archival.recall_session_gap_hours", "memory.advanced.session_gap_hours")
        advanced["archival"] = archival
    if isinstance(advanced.get("salience"), dict):
        advanced["salience"] = _renamed_in(advanced["salience"], SALIENCE_RENAMES, place["salience"], "salience")
    data["advanced"] = advanced
    return data


def _relative(place: str) -> str:
    return "advanced." if place == "memory.advanced" else ""


def _renamed_in(section: dict[str, Any], renames: Mapping[str, str], place: str, name: str) -> dict[str, Any]:
    """`renamed_keys` for a section of `memory`, its errors named relative to `memory` and its notes in full."""
    try:
        return dict(renamed_keys(section, renames, f"{place}.{name}", f"memory.advanced.{name}"))
    except ValueError as exc:
        raise ValueError(f"{_relative(place)}{name}.{exc}") from None


def written_locations(loc: tuple[Any, ...]) -> Iterator[tuple[Any, ...]]:
    """Where a file written with old names may hold the field validation calls `loc` (the new path): `loc`
    first, then each old spelling (`memory.archival.prefetch` for `memory.advanced.archival.candidates`)."""
    seen = {loc}
    queue = [loc]
    while queue:
        current = queue.pop(0)
        yield current
        for old, new in RENAMED:
            new_parts, old_parts = tuple(new.split(".")), tuple(old.split("."))
            if current[: len(new_parts)] == new_parts:
                candidate = old_parts + current[len(new_parts) :]
                if candidate not in seen:
                    seen.add(candidate)
                    queue.append(candidate)
