"""A `Bundle` written into a database as a new agent: every row in one transaction, then its archival memory
embedded again by this side's embedding model.

- **Ids.** Messages and steps get this database's next ids, in the file's order (so the window's order holds), and
  every reference to them is rewritten: a message's `step_id`, a block version's, a summary's first and last
  message, an archival memory's `source_message_ids`, a reflection's `last_message_id`. Archival memory and
  reflection ids are uuids and are kept, unless one is already taken here (the same agent imported twice, under
  another name): then all of that agent's are derived anew from the new agent's id, consistently, with their
  `superseded_by` links and versions.
- **Names.** A name that is taken is refused (`NameTaken`) unless the caller gives another (`name`) or asks to
  replace the agent there (`replace`): then the import is written under a temporary name first, the old agent is
  purged from every store (`runtime.erasure`), and the new one takes its name; a failed import leaves the old one
  as it was.
- **Code.** The spec is validated as a client's (`spec.trust`): a custom tool or schema by module is refused
  unless the caller allows code (`code="any"`, the CLI's `--allow-code`), except the block schemas pagemind itself
  ships (`code="shipped"`, the CLI's default; the API allows none): a file someone sent decides no code that runs.
- **Vectors.** Only SQL rows travel; the vector store's points are made here by the store's own reconcile
  (`memory.archival.reembed`) when the import opens the agent's archival store, with this side's model.
"""

from __future__ import annotations

import bisect
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Literal

import structlog
from pydantic import ValidationError
from sqlalchemy import insert, select
from sqlalchemy.engine import Connection

from pagemind.runtime.crypto.columns import cipher_of
from pagemind.runtime.memory.vectors.records import StoreError
from pagemind.runtime.memory.wiring import archival_service
from pagemind.runtime.porting.records import AGENT_TABLE, TABLES, Bundle, decode
from pagemind.runtime.process.settings import Settings
from pagemind.runtime.spec.agent import AgentSpec
from pagemind.runtime.spec.trust import REFUSED
from pagemind.runtime.state.block_edits import insert_history
from pagemind.runtime.state.records import AgentRecord, utcnow
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.state.tables.archival import archival_memories
from pagemind.runtime.state.tables.memory import memory_reviews, reflections

log = structlog.get_logger("pagemind.porting")


class NameTaken(ValueError):
    """An agent of that name exists here and the import was not told to rename or replace it."""


class ImportRefused(ValueError):
    """A file whose agent cannot be imported as it is (its spec is not valid here, or names code)."""


@dataclass
class ImportReport:
    """What an import made: the agent, how many records of each type, what it re-embedded, and notes on what did
    not map as it was (a Letta file's unknown tools, a block renamed, a setting not applied)."""

    name: str
    agent_id: int
    counts: dict[str, int]
    reembedded: int = 0
    replaced: bool = False
    notes: list[str] = field(default_factory=list)


Code = Literal["none", "shipped", "any"]
"""What code an imported spec may name: none (the API's: a client's spec), the block schemas pagemind ships
(`pagemind.blocks.…`, the example agents' profiles: the CLI's default), or any (`--allow-code`: a file of your own)."""
SHIPPED = "pagemind.blocks."


def _trust(data: dict[str, Any], code: Code) -> str:
    """The validation context's trust (`spec.trust`) for an imported spec: a file's only where what it names may run."""
    if code != "shipped":
        return "file" if code == "any" else "client"
    tools = [t for t in data.get("tools") or [] if isinstance(t, str) and ":" in t]
    # An MCP server (`spec.mcp`) runs a command or calls a URL: a file from elsewhere may not start one.
    servers = data.get("mcp_servers") or [t for t in data.get("tools") or [] if isinstance(t, dict)]
    blocks = [b for b in data.get("blocks") or [] if isinstance(b, dict)]
    schemas = [b["schema"] for b in blocks if isinstance(b.get("schema"), str)]
    if tools or servers or not schemas or any(not s.startswith(SHIPPED) for s in schemas):
        return "client"  # nothing to import, or something that may not be: refused with the hint below
    return "file"


def validated_spec(bundle: Bundle, name: str, *, code: Code = "shipped") -> AgentSpec:
    """The bundle's spec under `name`, validated with what `code` allows it to name."""
    data = {**bundle.agent["spec"], "name": name}
    try:
        return AgentSpec.model_validate(data, context={"trust": _trust(data, code)})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        needs_code = "code" in first["msg"] or first["type"] == REFUSED
        hint = " (pass --allow-code to import an agent whose tools are code of yours)" if needs_code else ""
        raise ImportRefused(f"the agent's spec does not load here: {where}: {first['msg']}{hint}") from None


def check_store(store: StateStore, bundle: Bundle) -> None:
    """Raise ImportRefused for a bundle this store cannot hold as it should: kept originals of redacted values
    (`privacy.keep_originals`) into a store without encryption at rest would lie there in plain text."""
    if bundle.of("pii_original") and cipher_of(store.engine) is None:
        raise ImportRefused(
            "the file holds the originals of redacted values (privacy.keep_originals), which are kept only sealed: "
            "set PAGEMIND_ENCRYPTION_KEY (or PAGEMIND_ENCRYPTION_KEY_FILE) here first"
        )


def import_bundle(
    store: StateStore,
    settings: Settings,
    bundle: Bundle,
    *,
    name: str | None = None,
    replace: bool = False,
    code: Code = "shipped",
    owner: str | None = None,
    clock: Callable[[], datetime] = utcnow,
) -> ImportReport:
    """Write `bundle` as a new agent called `name` (default: its own), owned by `owner`; see the module docstring.
    Raises NameTaken, ImportRefused."""
    target = name or bundle.name
    spec = validated_spec(bundle, target, code=code)
    check_store(store, bundle)
    existing = store.get_agent(target)
    if existing is not None and not replace:
        raise NameTaken(f"an agent called '{target}' exists; import it under another name or replace that one")
    landing = target if existing is None else f"{target}.importing-{uuid.uuid4().hex[:8]}"
    record, counts = _write(store, bundle, spec.model_copy(update={"name": landing}), owner)
    if existing is not None:
        from pagemind.runtime.erasure.purge import purge_agents

        purge_agents(store.engine, settings, [(existing.id, existing.name)])
        record = store.rename_agent(landing, target)
    report = ImportReport(target, record.id, counts, replaced=existing is not None)
    if counts.get("archival_memory"):
        report.reembedded = _embed(store, settings, spec, record, clock, report.notes)
    log.info("agent_imported", agent=target, agent_id=record.id, counts=counts, replaced=report.replaced)
    return report


def _embed(
    store: StateStore,
    settings: Settings,
    spec: AgentSpec,
    record: AgentRecord,
    clock: Callable[[], datetime],
    notes: list[str],
) -> int:
    """Make the vector points of the agent's archival memory with this side's model; how many memories. A store held
    by another process (a daemon serving) leaves them to be made when it opens the agent's memory."""
    service = archival_service(spec, store, settings, clock, record=record)
    memories = len(service.list(include_superseded=True))
    try:
        _ = service.store  # opening it reconciles: every memory without a point is embedded here (`reembed`)
    except StoreError as exc:
        notes.append(f"archival memories not embedded yet ({exc}): they are when the agent's memory is next opened")
        return 0
    return memories


def _write(store: StateStore, bundle: Bundle, spec: AgentSpec, owner: str | None) -> tuple[AgentRecord, dict[str, int]]:
    """Every row of the bundle under a new agent, in one transaction."""
    agent = bundle.agent
    now = utcnow()
    with store.engine.begin() as conn:
        agent_id = conn.execute(
            insert(AGENT_TABLE).returning(AGENT_TABLE.c.id),
            {
                "name": spec.name,
                "spec_hash": spec.spec_hash(),
                "spec_json": spec.model_dump_json(),
                "summary": agent.get("summary", ""),
                "pressure_warned": bool(agent.get("pressure_warned", False)),
                "token_correction": float(agent.get("token_correction", 1.0)),
                "created_at": _time(agent.get("created_at")) or now,
                "updated_at": _time(agent.get("updated_at")) or now,
                "owner": owner,
            },
        ).scalar_one()
        counts = _Rows(conn, agent_id, bundle).write()
    return store.agent_record(agent_id), counts


def _time(value: Any) -> datetime | None:
    return datetime.fromisoformat(value) if isinstance(value, str) else None


class _Ids:
    """Old ids → new ones; an id between two known ones maps to the new id of the nearest known one below it."""

    def __init__(self) -> None:
        self.old: list[int] = []
        self.new: list[int] = []

    def add(self, old: int, new: int) -> None:
        self.old.append(old)
        self.new.append(new)

    def __call__(self, old: int | None) -> int | None:
        if old is None:
            return None
        at = bisect.bisect_right(self.old, old) - 1
        return self.new[at] if at >= 0 else 0


def _same(values: dict[str, Any]) -> dict[str, Any]:
    return values


class _Rows:
    """The bundle's rows written under `agent_id` on `conn`, references rewritten (see the module docstring)."""

    def __init__(self, conn: Connection, agent_id: int, bundle: Bundle):
        self.conn, self.agent_id, self.bundle = conn, agent_id, bundle
        self.steps, self.messages = _Ids(), _Ids()
        self.memory_ids = self._uuid_map("archival_memory", archival_memories)
        self.reflection_ids = self._uuid_map("reflection", reflections)
        self.review_ids = self._uuid_map("memory_review", memory_reviews)

    def _uuid_map(self, kind: str, table: Any) -> dict[str, str]:
        ids = [str(r["id"]) for r in self.bundle.of(kind)]
        taken = set(self.conn.execute(select(table.c.id).where(table.c.id.in_(ids))).scalars()) if ids else set()
        if not taken:
            return {i: i for i in ids}
        return {i: str(uuid.uuid5(uuid.NAMESPACE_URL, f"pagemind:import:{self.agent_id}:{kind}:{i}")) for i in ids}

    def write(self) -> dict[str, int]:
        self._numbered("step", self.steps, lambda v: v)
        self._numbered("message", self.messages, lambda v: {**v, "step_id": self.steps(v.get("step_id"))})
        rewrite: dict[str, Callable[[dict[str, Any]], dict[str, Any]]] = {
            "block_version": lambda v: {**v, "step_id": self.steps(v.get("step_id"))},
            "summary": lambda v: {
                **v,
                "first_message_id": self.messages(v.get("first_message_id")),
                "last_message_id": self.messages(v.get("last_message_id")),
            },
            "archival_memory": self._memory,
            "archival_version": lambda v: {**v, "memory_id": self.memory_ids.get(v["memory_id"], v["memory_id"])},
            "reflection": lambda v: {
                **v,
                "id": self.reflection_ids[v["id"]],
                "last_message_id": self.messages(v["last_message_id"]),
            },
            "origin": lambda v: {**v, "template": None},
            "memory_review": self._review,
        }
        counts = {"step": len(self.bundle.of("step")), "message": len(self.bundle.of("message"))}
        for kind, table in TABLES.items():
            if kind in ("step", "message"):
                continue
            change = rewrite.get(kind, _same)
            rows = [{**change(decode(table, r)), "agent_id": self.agent_id} for r in self.bundle.of(kind)]
            if kind == "origin" and not rows:  # served by the daemon as an agent made from its stored spec
                rows = [{"agent_id": self.agent_id, "template": None, "blocks": {}, "created_at": utcnow()}]
            if kind == "block_version":
                insert_history(self.conn, rows)  # the one module that writes block history
            elif rows:
                self.conn.execute(insert(table), rows)
            counts[kind] = len(self.bundle.of(kind))
        return counts

    def _numbered(self, kind: str, ids: _Ids, change: Callable[[dict[str, Any]], dict[str, Any]]) -> None:
        """Insert rows whose ids this database assigns, in the file's order, noting old id → new id."""
        table = TABLES[kind]
        records = sorted(self.bundle.of(kind), key=lambda r: int(r["id"]))
        if not records:
            return
        values = []
        for record in records:
            row = change(decode(table, record))
            row.pop("id", None)
            values.append({**row, "agent_id": self.agent_id})
        statement = insert(table).returning(table.c.id, sort_by_parameter_order=True)
        for record, new in zip(records, self.conn.execute(statement, values).scalars().all(), strict=True):
            ids.add(int(record["id"]), int(new))

    def _review(self, values: dict[str, Any]) -> dict[str, Any]:
        supersedes = values.get("supersedes")
        return {
            **values,
            "id": self.review_ids[values["id"]],
            "supersedes": self.memory_ids.get(supersedes, supersedes) if supersedes else None,
            "source_message_ids": [self.messages(i) for i in values.get("source_message_ids") or []],
        }

    def _memory(self, values: dict[str, Any]) -> dict[str, Any]:
        ids = self.memory_ids
        superseded = values.get("superseded_by")
        return {
            **values,
            "id": ids[values["id"]],
            "state": "live",
            "superseded_by": ids.get(superseded, superseded) if superseded else None,
            "source_message_ids": [self.messages(i) for i in values.get("source_message_ids") or []],
        }
