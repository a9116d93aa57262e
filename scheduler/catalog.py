"""Which agents the daemon serves, and the spec each one runs with now.

Three kinds of agent, one lookup (`spec_for`):

- a YAML agent: a file in the agents folder (without `template: true`); its spec is the file, read again when
  its mtime changes;
- an agent made from a template (`create` with `template=`): its spec is the template's, renamed, so a change to
  the template's file reaches every agent made from it at its next turn; memory is never touched (block values
  seed a new agent only, as for YAML agents). Any YAML in the folder can serve as a template; `template: true`
  makes one that is not an agent itself;
- an agent made from a spec given to the API (`create` with `spec=`): its spec is the one stored with it.

`agent_origins` records the last two (the template's name, or none, and the block values given at creation).

The folder's files, read again when they change, and why a file is not served: `scheduler.agent_folder`
(`AgentCatalog.folder`).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any

import structlog
from pydantic import ValidationError
from sqlalchemy import bindparam, delete, select
from sqlalchemy.exc import IntegrityError

from pagemind.runtime.process.problems import one_line_problems
from pagemind.runtime.spec.agent import AgentSpec
from pagemind.runtime.state.async_pg import AwaitedStatements
from pagemind.runtime.state.keys import KeyStore
from pagemind.runtime.state.new_agent import insert_agent
from pagemind.runtime.state.records import AgentRecord, aware
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.state.tables.agents import AgentRow
from pagemind.runtime.state.tables.daemon import agent_origins
from pagemind.runtime.state.tables.schema import table_of
from pagemind.scheduler.agent_folder import AgentFolder
from pagemind.scheduler.errors import (
    AgentExists,
    AgentUnavailable,
    DaemonError,
    InvalidBlocks,
    NotDeletable,
    UnknownAgent,
    UnknownTemplate,
)

log = structlog.get_logger("pagemind.scheduler")
agents = table_of(AgentRow)
ORIGIN_TTL_S = 2.0  # how long an agent made through the daemon is taken to exist without asking the database
# Built once (a statement built per call costs more CPU than running it); read on an autocommit connection.
ORIGIN = (
    select(agent_origins.c.agent_id, agent_origins.c.template)
    .join(agents, agents.c.id == agent_origins.c.agent_id)
    .where(agents.c.name == bindparam("p_name"))
)


@dataclass(frozen=True)
class AgentInfo:
    """An agent the daemon serves, as the API lists it."""

    name: str
    template: str | None  # the template it was made from; None for a YAML agent or one made from a spec
    created_at: datetime | None  # None for a YAML agent that has never run
    pending: int  # items in its inbox still to run
    source: str = "yaml"  # "yaml" (a file in the folder), "template" (made from one) or "spec" (made from a spec)
    owner: str | None = None  # the end user it belongs to (`runtime.state.keys`); None: nobody's


@dataclass(frozen=True)
class _Origin:
    agent_id: int
    template: str | None
    read_at: float = 0.0  # time.monotonic() when read


class AgentCatalog:
    """The agents folder and the agents made through the daemon, over one `StateStore`."""

    def __init__(self, directory: str | Path | None, store: StateStore):
        self.folder = AgentFolder(directory)
        self.store = store
        self._awaited = AwaitedStatements.of(store.engine)
        self._origins: dict[str, _Origin] = {}
        self._yaml_ids: dict[str, int] = {}
        # An agent made from a template: (the template's spec it was derived from, the agent's spec). The same
        # spec object for as long as the template's file is unchanged, so that `AgentPool` knows it by identity
        # instead of copying the spec and hashing it again at every turn.
        self._derived: dict[str, tuple[AgentSpec, AgentSpec]] = {}

    # -- any agent ----------------------------------------------------------------------------------------------

    def _origin(self, name: str) -> _Origin | None:
        """The agent's origin row, cached for `ORIGIN_TTL_S`: another daemon process may create or delete agents,
        so a miss is never cached and a hit is read again after a while."""
        cached = self._cached_origin(name)
        if cached is not None:
            return cached
        with self.store.one_statement() as conn:
            row = conn.execute(ORIGIN, {"p_name": name}).first()
        return self._remember_origin(name, row._mapping if row else None)

    async def read_origin(self, name: str) -> None:
        """Read the agent's origin now if `agent_id` would (its cached one is old or missing), awaited on Postgres
        (`runtime.state.async_pg`): a submission's read then does not hold the event loop."""
        if self._awaited is None or name in self._yaml_ids or self._cached_origin(name) is not None:
            return
        self._remember_origin(name, await self._awaited.first(ORIGIN, {"p_name": name}, shape="mapping"))

    def _cached_origin(self, name: str) -> _Origin | None:
        cached = self._origins.get(name)
        return cached if cached is not None and cached.read_at > time.monotonic() - ORIGIN_TTL_S else None

    def _remember_origin(self, name: str, row: Mapping[Any, Any] | None) -> _Origin | None:
        origin = _Origin(row["agent_id"], row["template"], time.monotonic()) if row else None
        if origin is None:
            self._origins.pop(name, None)
            self._derived.pop(name, None)
        else:
            self._origins[name] = origin
        return origin

    def spec_for(self, name: str) -> AgentSpec:
        """The spec agent `name` runs with now; raises `UnknownAgent` (`AgentUnavailable`: its file, or its
        template's, does not load)."""
        entry = self.folder.file(name)
        if entry is not None and not entry.spec.template:
            return entry.spec
        origin = self._origin(name) if entry is None else None
        if origin is None:
            if entry is None and name not in self.folder:
                self.folder.rescan()  # a file added since
                added = self.folder.file(name)
                if added is not None and not added.spec.template:
                    return added.spec
            raise self.folder.unavailable(name)
        if origin.template is not None:
            template = self.folder.file(origin.template)
            if template is None:
                broken = self.folder.unavailable(origin.template)
                if isinstance(broken, AgentUnavailable):  # say why, not that the agent is unknown
                    raise AgentUnavailable(name, broken.path, broken.why)
                raise UnknownAgent(name) from UnknownTemplate(origin.template, self.folder.templates())
            return self._derived_spec(name, template.spec)
        stored = self.store.stored_spec_json(name)
        if stored is None:
            raise UnknownAgent(name)
        # An agent a client posted: what it stored names no code, and is read as a client's spec again (`spec.trust`).
        return AgentSpec.model_validate_json(stored, context={"trust": "client"})

    def _derived_spec(self, name: str, template: AgentSpec) -> AgentSpec:
        """The spec of agent `name` made from `template`: the template's, renamed (made once per template version)."""
        derived = self._derived.get(name)
        if derived is None or derived[0] is not template:
            derived = self._derived[name] = (template, template.model_copy(update={"name": name, "template": False}))
        return derived[1]

    def agent_id(self, name: str) -> int:
        """The stored id of agent `name`, creating its state on first use (a YAML agent that never ran)."""
        if name in self._yaml_ids and name in self.folder:
            return self._yaml_ids[name]
        origin = self._origin(name)
        if origin is not None:
            return origin.agent_id
        spec = self.spec_for(name)
        record = self.store.get_agent(name) or self.store.ensure_agent(spec)
        self._yaml_ids[name] = record.id  # a YAML agent: it can be neither deleted nor renamed by the daemon
        return record.id

    def name_of(self, agent_id: int) -> str:
        """The name of the stored agent with this id (the inbox keys items by id)."""
        return self.store.agent_record(agent_id).name

    # -- agents made through the daemon -------------------------------------------------------------------------

    def create(
        self,
        name: str,
        now: datetime,
        *,
        template: str | None = None,
        spec: AgentSpec | None = None,
        blocks: dict[str, str] | None = None,
        owner: str | None = None,
    ) -> AgentInfo:
        """Make an agent from a template (by name) or a spec, with `blocks` as its first block values, belonging to
        `owner` (an end user's id; None: nobody's) from its first commit; raises `AgentExists`, `UnknownTemplate`
        (`AgentUnavailable`: the template's file does not load), or `DaemonError` for a block the spec lacks or a
        value over its limit."""
        if (template is None) == (spec is None):
            raise DaemonError("give a template or a spec (one of them)")
        if name in self.folder:
            raise AgentExists(name)
        if template is not None:
            source = self.folder.file(template)
            if source is None:
                broken = self.folder.unavailable(template)
                if isinstance(broken, AgentUnavailable):
                    raise AgentUnavailable(template, broken.path, broken.why, "template")
                raise UnknownTemplate(template, self.folder.templates())
            spec = source.spec
        assert spec is not None  # a template's, or the one given (exactly one of them: checked above)
        seeded = _seeded(spec.model_copy(update={"name": name, "template": False}), blocks or {})
        try:  # a new name (the usual case): the agent, its blocks and its origin in one commit
            with self.store.engine.begin() as conn:
                record = insert_agent(conn, seeded, now, owner)
                conn.execute(
                    agent_origins.insert().values(
                        agent_id=record.id, template=template, blocks=blocks or {}, created_at=now
                    )
                )
        except IntegrityError:  # the name is taken: by one of ours, by `pagemind run`, or by a half-made one
            return self._create_over(name, now, template, seeded, blocks, owner)
        return self._created(name, template, record)

    def _create_over(
        self,
        name: str,
        now: datetime,
        template: str | None,
        seeded: AgentSpec,
        blocks: dict[str, str] | None,
        owner: str | None,
    ) -> AgentInfo:
        if self._origin(name) is not None:
            raise AgentExists(name)
        existing = self.store.get_agent(name)
        if existing is not None and (existing.spec_hash != seeded.spec_hash() or existing.owner != owner):
            raise AgentExists(name)  # stored by something else (`pagemind run`), or another user's: never taken over
        record = existing or self.store.ensure_agent(seeded)
        KeyStore(self.store.engine).assign(record.id, owner)  # before its origin: never served as nobody's
        record = replace(record, owner=owner)
        with self.store.engine.begin() as conn:
            conn.execute(
                agent_origins.insert().values(
                    agent_id=record.id, template=template, blocks=blocks or {}, created_at=now
                )
            )
        return self._created(name, template, record)

    def _created(self, name: str, template: str | None, record: AgentRecord) -> AgentInfo:
        self._origins[name] = _Origin(record.id, template, time.monotonic())
        log.info("agent_created", agent=name, template=template)
        return AgentInfo(name, template, record.created_at, 0, "template" if template else "spec", record.owner)

    def delete(self, name: str) -> int:
        """Stop serving an agent made through the daemon; returns its id. Its stored state is kept under the name
        `NAME.deleted-ID` (nothing is destroyed, and the name is free again). Raises `NotDeletable` for a YAML
        agent and `UnknownAgent`."""
        if self.folder.is_yaml_agent(name):
            raise NotDeletable(name)
        origin = self._origin(name)
        if origin is None:
            raise UnknownAgent(name)
        with self.store.engine.begin() as conn:
            conn.execute(delete(agent_origins).where(agent_origins.c.agent_id == origin.agent_id))
        self.store.rename_agent(name, f"{name}.deleted-{origin.agent_id}")
        self._origins.pop(name, None)
        self._derived.pop(name, None)
        log.info("agent_deleted", agent=name, agent_id=origin.agent_id)
        return origin.agent_id

    def deletable_id(self, name: str) -> int:
        """The id of an agent made through the daemon (what may be deleted or purged); raises `NotDeletable` for a
        YAML agent and `UnknownAgent`."""
        if self.folder.is_yaml_agent(name):
            raise NotDeletable(name)
        origin = self._origin(name)
        if origin is None:
            raise UnknownAgent(name)
        return origin.agent_id

    def forget(self, name: str) -> None:
        """Drop what is cached of an agent that is gone (purged: `runtime.erasure` deleted its origin)."""
        self._origins.pop(name, None)
        self._derived.pop(name, None)

    def info(self, name: str, open_items: Callable[[int], int]) -> AgentInfo:
        """One served agent (`open_items(agent id)`: its open items); `UnknownAgent`. Reads one agent, where
        `list` reads them all."""
        entry = self.folder.last_read(name)
        if entry is not None and not entry.spec.template:
            record = self.store.get_agent(name)
            return AgentInfo(
                name,
                None,
                aware(record.created_at) if record else None,
                open_items(record.id) if record else 0,
                "yaml",
                record.owner if record else None,
            )
        origin = self._origin(name)
        if origin is None:
            raise self.folder.unavailable(name)
        record = self.store.agent_record(origin.agent_id)
        return AgentInfo(
            name,
            origin.template,
            aware(record.created_at),
            open_items(origin.agent_id),
            "template" if origin.template else "spec",
            record.owner,
        )

    def list(self, pending: dict[int, int]) -> list[AgentInfo]:
        """Every agent served: YAML agents and agents made through the daemon, by name (`pending`: open items per
        agent id)."""
        with self.store.engine.connect() as conn:
            rows = conn.execute(
                select(
                    agents.c.id,
                    agents.c.name,
                    agents.c.created_at,
                    agents.c.owner,
                    agent_origins.c.template,
                    agent_origins.c.agent_id.label("origin"),
                ).outerjoin(agent_origins, agent_origins.c.agent_id == agents.c.id)
            ).all()
        stored = {r.name: r for r in rows}
        infos = [
            AgentInfo(
                name,
                None,
                aware(stored[name].created_at) if name in stored else None,
                pending.get(stored[name].id, 0) if name in stored else 0,
                "yaml",
                stored[name].owner if name in stored else None,
            )
            for name in self.folder.agent_names()
        ]
        infos += [
            AgentInfo(
                r.name,
                r.template,
                aware(r.created_at),
                pending.get(r.id, 0),
                "template" if r.template else "spec",
                r.owner,
            )
            for r in rows
            if r.origin is not None and r.name not in self.folder
        ]
        return sorted(infos, key=lambda info: info.name)


def _seeded(spec: AgentSpec, blocks: dict[str, str]) -> AgentSpec:
    labels = {b.label for b in spec.blocks}
    unknown = sorted(set(blocks) - labels)
    if unknown:
        raise InvalidBlocks(
            f"no block {', '.join(map(repr, unknown))} in the spec (blocks: {', '.join(sorted(labels))})"
        )
    data = json.loads(spec.model_dump_json())
    for block in data["blocks"]:
        if block["label"] in blocks:
            block["value"] = blocks[block["label"]]
    try:
        return AgentSpec.model_validate(data)
    except ValidationError as exc:
        loc = exc.errors()[0]["loc"]
        which = f"block '{data['blocks'][loc[1]]['label']}': " if loc[:1] == ("blocks",) and len(loc) > 1 else ""
        raise InvalidBlocks(f"block values do not fit the spec: {which}{one_line_problems(exc)}") from None
