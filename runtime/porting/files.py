"""Files in and out: which format a file holds (by its content, whatever its name), imported; an agent exported.

    reports = import_file(store, settings, Path("agent.af").read_bytes(), name="lin")   # either format
    for line in export_lines(store, "lin", "jsonl", redact=True): ...                   # or "af"; placeholders

A file whose first line is a `pagemind.agent` header is an export of ours (`records`); otherwise JSON that holds a
Letta agent file, once or encoded twice, is one (`letta`). Anything else is refused with what was expected.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from pagemind.runtime.porting.agent_file import agent_file
from pagemind.runtime.porting.export import UnknownAgentName, pagemind_version, read_bundle
from pagemind.runtime.porting.letta import NotAnAgentFile, decoded, is_agent_file, read_agent_file
from pagemind.runtime.porting.load import (
    Code,
    ImportRefused,
    ImportReport,
    NameTaken,
    check_store,
    import_bundle,
    validated_spec,
)
from pagemind.runtime.porting.records import FORMAT, Bundle, FormatError, lines, parse
from pagemind.runtime.porting.redaction import redact_bundle
from pagemind.runtime.process.settings import Settings
from pagemind.runtime.spec.agent import AgentSpec
from pagemind.runtime.state.records import utcnow
from pagemind.runtime.state.store import StateStore

Format = Literal["jsonl", "af"]


@dataclass
class Loaded:
    """What a file holds: its format and each agent in it with the notes on what did not map."""

    format: Format
    agents: list[tuple[Bundle, list[str]]] = field(default_factory=list)


def read_file(data: bytes) -> Loaded:
    """The agents a file holds; raises FormatError naming what the file is not."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise FormatError(
            f"not UTF-8 text (byte {exc.start}): neither a {FORMAT} export nor a Letta agent file"
        ) from None
    first = text.lstrip().split("\n", 1)[0]
    if _is_header(first):
        return Loaded("jsonl", [(parse(text.splitlines()), [])])
    try:
        document = decoded(text)
    except (json.JSONDecodeError, RecursionError) as exc:
        raise FormatError(
            f"neither a {FORMAT} export (no header line) nor a Letta agent file (not JSON: {exc})"
        ) from None
    if not is_agent_file(document):
        raise FormatError(f"neither a {FORMAT} export nor a Letta agent file (no `agents`, no `core_memory`)")
    try:
        return Loaded("af", [(a.bundle, a.notes) for a in read_agent_file(document)])
    except (NotAnAgentFile, ValueError) as exc:
        raise FormatError(f"a Letta agent file this pagemind cannot read: {exc}") from None


def _is_header(line: str) -> bool:
    try:
        record = json.loads(line)
    except json.JSONDecodeError:
        return False
    return isinstance(record, dict) and record.get("format") == FORMAT


def import_file(
    store: StateStore,
    settings: Settings,
    data: bytes,
    *,
    name: str | None = None,
    replace: bool = False,
    code: Code = "shipped",
    owner: str | None = None,
    check: Callable[[Bundle], None] | None = None,
) -> list[ImportReport]:
    """Import every agent of a file of either format (see `load.import_bundle`); `name` only for a file of one
    agent. `check` sees each bundle first and may refuse it (the API's rules for a client). Raises FormatError,
    ImportRefused, NameTaken."""
    loaded = read_file(data)
    if name is not None and len(loaded.agents) != 1:
        raise ImportRefused(f"the file holds {len(loaded.agents)} agents: a new name is for a file of one")
    for bundle, _ in loaded.agents:  # every agent checked before any is written
        if check is not None:
            check(bundle)
        validated_spec(bundle, name or bundle.name, code=code)
        check_store(store, bundle)
        target = name or bundle.name
        if not replace and store.get_agent(target) is not None:
            raise NameTaken(f"an agent called '{target}' exists; import it under another name or replace it")
    reports = []
    for bundle, notes in loaded.agents:
        report = import_bundle(store, settings, bundle, name=name, replace=replace, code=code, owner=owner)
        report.notes = notes + report.notes
        reports.append(report)
    return reports


def stored_spec(store: StateStore, name: str) -> AgentSpec:
    """The spec an imported agent was stored with, read as a client's (nothing it names is imported): what
    `Agent.load` takes to run it."""
    stored = store.stored_spec_json(name)
    if stored is None:
        raise UnknownAgentName(name)
    return AgentSpec.model_validate_json(stored, context={"trust": "client"})


def export_lines(
    store: StateStore, name: str, fmt: Format = "jsonl", now: datetime | None = None, *, redact: bool = False
) -> Iterator[str]:
    """The stored agent `name` as a file's text, in pieces: JSON Lines, or one Letta agent file (`af`); with
    `redact`, its personal data replaced by placeholders (`redaction`), in either format. Raises
    `export.UnknownAgentName`."""
    bundle = read_bundle(store.engine, name)
    if redact:
        bundle = redact_bundle(bundle)
    at = now or utcnow()
    if fmt == "af":
        document = agent_file(bundle, at, pagemind_version(), redacted=redact)
        return iter([json.dumps(document, ensure_ascii=False, indent=1) + "\n"])
    return lines(bundle, at, pagemind_version(), redacted=redact)
