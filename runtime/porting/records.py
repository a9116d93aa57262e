"""The `pagemind.agent` JSON Lines format: one agent and all of its memory, one record per line.

    {"format": "pagemind.agent", "version": 1, "agent": "companion", "exported_at": "…", "pagemind": "0.9.0"}
    {"type": "agent", "name": "companion", "spec": {…}, "summary": "…", "pressure_warned": false, …}
    {"type": "block", "label": "human", "value": "…", "char_limit": 2000, "version": 3, …}
    {"type": "message", "id": 17, "role": "assistant", "content": null, "tool_calls": [{"id", "name", "arguments"}], …}
    …
    {"type": "end", "records": 412}

The first line is the header (format name and version); every other line is one record, `type` naming which,
its other keys the columns of the SQL row it came from, by their names in `runtime/state/tables/`, less the
agent's id (times as ISO 8601 with their offset). Ids that only one database means (`message.id`, `step.id`) are
kept so that records can refer to each other (a summary's `first_message_id`, an archival memory's
`source_message_ids`); an import gives them new ones and rewrites the references. The last line, `end`, counts the
records before it: a file cut short is refused rather than imported in part.

A reader takes a file of its own major version (`VERSION`) and refuses a newer one by name; keys it does not know
are ignored, so a later minor addition stays readable. The header of a file written with `--redact` says
`"redacted": true` (`porting.redaction`). Issue 35 added `muted_topic`, `memory_review` and, for an agent with
`privacy.pii: redact` only, its placeholder numbering (`pii_key`, `pii_placeholder`; `pii_original` under
`keep_originals`): a file without them reads as before.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import DateTime, Table

from pagemind.runtime.state.block_edits import VERSIONS
from pagemind.runtime.state.records import aware
from pagemind.runtime.state.tables.agents import AgentRow, BlockRow
from pagemind.runtime.state.tables.archival import archival_memories, archival_memory_versions
from pagemind.runtime.state.tables.conversation import MessageRow, StepRow, SummaryRow, TurnKeyRow
from pagemind.runtime.state.tables.daemon import agent_origins, trigger_fires
from pagemind.runtime.state.tables.memory import memory_reviews, muted_topics, reflections
from pagemind.runtime.state.tables.schema import table_of
from pagemind.runtime.state.tables.security import pii_keys, pii_originals, pii_placeholders

FORMAT = "pagemind.agent"
VERSION = 1

# Record type → its table, in the order a file lists them (and an import writes them: referenced rows first).
TABLES: dict[str, Table] = {
    "block": table_of(BlockRow),
    "block_version": VERSIONS,
    "step": table_of(StepRow),
    "message": table_of(MessageRow),
    "summary": table_of(SummaryRow),
    "archival_memory": archival_memories,
    "archival_version": archival_memory_versions,
    "trigger_fire": trigger_fires,
    "turn_key": table_of(TurnKeyRow),
    "reflection": reflections,
    "origin": agent_origins,
    "muted_topic": muted_topics,
    "memory_review": memory_reviews,
    # Redaction's numbering (`runtime.privacy`): only for an agent with `privacy.pii: redact` (`export.read_bundle`).
    "pii_key": pii_keys,
    "pii_placeholder": pii_placeholders,
    "pii_original": pii_originals,
}
PRIVACY_KINDS = ("pii_key", "pii_placeholder", "pii_original")
AGENT_TABLE = table_of(AgentRow)
# Columns a record never carries: the agent's id (the importing side's), surrogate keys nothing refers to, who owns
# the agent (the importing side decides), and an archival row's in-flight write markers (only settled rows go; a
# pending review's `supersedes`, the memory it replaces once approved, is no marker and travels).
DROPPED = frozenset({"agent_id", "owner", "spec_hash", "write_token", "write_started"})
DROPPED_ARCHIVAL = frozenset({"supersedes"})
KEEP_ID = frozenset({"message", "step", "archival_memory", "reflection", "memory_review"})


class FormatError(ValueError):
    """A file that is not an agent export this version reads, or one cut short; says which line and why."""


@dataclass
class Bundle:
    """One agent as a file carries it: its own record (spec and window state) and its rows by record type."""

    agent: dict[str, Any]
    rows: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """The agent's name in the file."""
        return str(self.agent["name"])

    def of(self, kind: str) -> list[dict[str, Any]]:
        """The records of one type (empty when there are none)."""
        return self.rows.setdefault(kind, [])


def encode(table: Table, row: Any, *, keep_id: bool) -> dict[str, Any]:
    """A SQL row (a mapping) as a record's fields: times as ISO 8601 with their offset, dropped columns left out."""
    record: dict[str, Any] = {}
    for column in table.columns:
        name = column.name
        if name in DROPPED or (name == "id" and not keep_id):
            continue
        if table is archival_memories and name in DROPPED_ARCHIVAL:
            continue
        value = row[name]
        if isinstance(value, datetime):
            value = aware(value).isoformat()
        record[name] = value
    return record


def decode(table: Table, record: dict[str, Any]) -> dict[str, Any]:
    """A record's fields as a row's values for `table`: only its columns, times parsed back."""
    values: dict[str, Any] = {}
    for column in table.columns:
        if column.name not in record:
            continue
        value = record[column.name]
        if isinstance(value, str) and _is_time(column):
            value = datetime.fromisoformat(value)
        values[column.name] = value
    return values


def _is_time(column: Any) -> bool:
    """Whether a column holds times (a plain DateTime, or a type that decorates one, as SQLModel's does)."""
    kind = column.type
    return isinstance(kind, DateTime) or isinstance(getattr(kind, "impl", None), DateTime)


def header(bundle: Bundle, exported_at: datetime, version: str, *, redacted: bool = False) -> dict[str, Any]:
    """The first line of a file: format, version, which agent, when and by which pagemind; `redacted: true` for a
    file whose personal data is placeholders (`--redact`; the key is absent otherwise)."""
    first: dict[str, Any] = {
        "format": FORMAT,
        "version": VERSION,
        "agent": bundle.name,
        "exported_at": exported_at.isoformat(),
        "pagemind": version,
    }
    if redacted:
        first["redacted"] = True
    return first


def lines(bundle: Bundle, exported_at: datetime, version: str, *, redacted: bool = False) -> Iterator[str]:
    """The file's lines (each ending in a newline): header, agent, records by type, end."""
    count = 1
    yield _line(header(bundle, exported_at, version, redacted=redacted))
    yield _line({"type": "agent", **bundle.agent})
    for kind in TABLES:
        for record in bundle.rows.get(kind, []):
            count += 1
            yield _line({"type": kind, **record})
    yield _line({"type": "end", "records": count})


def _line(record: dict[str, Any]) -> str:
    # ensure_ascii off: a file of Chinese conversation stays readable and a third the size.
    return json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n"


def parse(text_lines: Iterable[str]) -> Bundle:
    """A bundle from a file's lines; raises FormatError for another format, a newer version, an unknown record
    type, or a file without its end record (cut short)."""
    bundle: Bundle | None = None
    count, ended = 0, False
    for number, raw in enumerate(text_lines, start=1):
        if not raw.strip():
            continue
        if ended:
            raise FormatError(f"line {number}: a record after the end record")
        try:
            record = json.loads(raw)
        except json.JSONDecodeError as exc:
            raise FormatError(f"line {number}: not JSON ({exc.msg})") from None
        if not isinstance(record, dict):
            raise FormatError(f"line {number}: not a JSON object")
        if number == 1:
            check_header(record)
            continue
        kind = record.pop("type", None)
        if kind == "end":
            ended = True
            if record.get("records") != count + (1 if bundle else 0):
                raise FormatError(f"line {number}: the end record counts {record.get('records')}, the file has more")
        elif kind == "agent":
            bundle = Bundle(agent=record)
        elif bundle is None:
            raise FormatError(f"line {number}: a {kind!r} record before the agent record")
        elif kind in TABLES:
            bundle.of(kind).append(record)
            count += 1
        else:
            raise FormatError(f"line {number}: unknown record type {kind!r}")
    if bundle is None or not ended:
        raise FormatError("the file ends before its end record: cut short, or not an agent export")
    return bundle


def check_header(record: dict[str, Any]) -> None:
    """Raise FormatError unless `record` is this format's header at a version this reader takes."""
    if record.get("format") != FORMAT:
        raise FormatError(f"line 1: not a {FORMAT} file (its header names format {record.get('format')!r})")
    version = record.get("version")
    if not isinstance(version, int) or version > VERSION or version < 1:
        raise FormatError(f"line 1: {FORMAT} version {version!r}; this pagemind reads version {VERSION}")
