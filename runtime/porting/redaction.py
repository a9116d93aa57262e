"""An export with its personal data replaced by typed placeholders (`pagemind export --redact`, `?redact=true`).

    redacted = redact_bundle(read_bundle(engine, "lin"))   # then written as any bundle, its header saying so

Every text a person or the model wrote goes through the PII redaction of `runtime.privacy` (every kind it knows,
street addresses included): message content and tool-call arguments, block values and their history, the window's
summary and the summaries, archival memory text and its versions (episodes are archival memories), reflections'
plans and errors, pending reviews, muted topics, the origin's and the spec's block seed values. Structure is left
as it is: ids, roles, kinds, labels, tool names, times, and under JSON values every key and the values of keys
that name structure (`STRUCTURE`).

One `PlaceholderBook` numbers the whole file, under a fresh random key that is never written: `[phone#1]` is the
same number wherever it stands in the file, and nothing in the file maps it back. Placeholders already in the
agent's text (an agent with `privacy.pii: redact`) are kept, and new numbers start above them, so no number means
two values. The agent's own numbering (`pii_*` records) is left out: its keyed hashes could test guesses.
"""

from __future__ import annotations

import secrets
from typing import Any

from pagemind.runtime.porting.records import PRIVACY_KINDS, Bundle
from pagemind.runtime.privacy.book import Entry, PlaceholderBook
from pagemind.runtime.privacy.recognisers import KINDS
from pagemind.runtime.privacy.redactor import PLACEHOLDER, redact, redact_arguments

# The fields of each record type that hold text someone wrote (a string, or JSON whose strings are text).
TEXT_FIELDS: dict[str, tuple[str, ...]] = {
    "block": ("value",),
    "block_version": ("old_value", "new_value"),
    "message": ("content",),
    "summary": ("text",),
    "archival_memory": ("text",),
    "archival_version": ("text", "detail"),
    "reflection": ("plan", "error"),
    "memory_review": ("text",),
    "muted_topic": ("topic",),
    "origin": ("blocks",),
}
# Keys inside JSON values whose strings are structure (ids, names of operations), never redacted.
STRUCTURE = frozenset(
    {"id", "ids", "kind", "kinds", "label", "operation", "op", "action", "role", "name", "type", "status", "by"}
    | {"superseded_by", "supersedes", "tool_call_id", "origin", "tags"}
    | {"keep", "drop", "winner", "losers"}  # a reflection plan's memory ids (`reflection.schema`)
)


def redact_bundle(bundle: Bundle, kinds: tuple[str, ...] = KINDS) -> Bundle:
    """A copy of `bundle` with the personal data of `kinds` in its texts replaced by placeholders numbered across
    the whole bundle, and without the agent's own numbering records."""
    book = PlaceholderBook(secrets.token_bytes(32))
    _reserve(book, bundle)
    work = _Redaction(kinds, book)
    agent = dict(bundle.agent)
    agent["summary"] = work.value(agent.get("summary"))
    agent["spec"] = _spec(agent.get("spec") or {}, work)
    rows: dict[str, list[dict[str, Any]]] = {}
    for kind, records in bundle.rows.items():
        if kind in PRIVACY_KINDS:
            continue
        rows[kind] = [work.record(kind, record) for record in records]
    if "muted_topic" in rows:  # two topics may now read the same: a topic is the row's key, keep one of each
        first: dict[str, dict[str, Any]] = {}
        for row in rows["muted_topic"]:
            first.setdefault(row["topic"], row)
        rows["muted_topic"] = list(first.values())
    return Bundle(agent=agent, rows=rows)


def _spec(spec: dict[str, Any], work: _Redaction) -> dict[str, Any]:
    """The spec with its blocks' seed values redacted (the rest of it is configuration)."""
    blocks = spec.get("blocks")
    if not isinstance(blocks, list):
        return spec
    seeded = [{**b, "value": work.value(b["value"])} if isinstance(b, dict) and "value" in b else b for b in blocks]
    return {**spec, "blocks": seeded}


def _reserve(book: PlaceholderBook, bundle: Bundle) -> None:
    """Enter every placeholder the bundle holds already, so that new numbers of a kind start above them."""
    found: set[tuple[str, int]] = set()

    def scan(value: Any) -> None:
        if isinstance(value, str):
            found.update((m[1], int(m[2])) for m in PLACEHOLDER.finditer(value))
        elif isinstance(value, list):
            for item in value:
                scan(item)
        elif isinstance(value, dict):
            for item in value.values():
                scan(item)

    scan(bundle.agent)
    scan(bundle.rows)
    for kind, number in found:  # a digest no value hashes to: the entry only holds the number
        book.numbers[f"in-file:{kind}#{number}"] = Entry(kind, number, f"in-file:{kind}#{number}")


class _Redaction:
    """The redaction of one file: its kinds and its book (the numbers it gives are not stored anywhere)."""

    def __init__(self, kinds: tuple[str, ...], book: PlaceholderBook):
        self.kinds, self.book = kinds, book
        self.new: list[Entry] = []

    def record(self, kind: str, record: dict[str, Any]) -> dict[str, Any]:
        """A record with its text fields redacted."""
        changed = dict(record)
        for name in TEXT_FIELDS.get(kind, ()):
            if name in changed:
                changed[name] = self.value(changed[name])
        if kind == "message" and changed.get("tool_calls"):
            changed["tool_calls"] = [self.call(call) for call in changed["tool_calls"]]
        return changed

    def call(self, call: Any) -> Any:
        """A tool call with its arguments redacted (its id and tool name are structure)."""
        if not isinstance(call, dict) or not isinstance(call.get("arguments"), str):
            return call
        return {**call, "arguments": redact_arguments(call["arguments"], self.kinds, self.book, self.new)}

    def value(self, value: Any, key: str = "") -> Any:
        """A text, or every string of a JSON value but those under keys of `STRUCTURE`, redacted."""
        if isinstance(value, str):
            if key in STRUCTURE or key.endswith(("_id", "_ids", "_at")):
                return value
            return redact(value, self.kinds, self.book).text
        if isinstance(value, list):
            return [self.value(item, key) for item in value]
        if isinstance(value, dict):
            return {k: self.value(v, str(k)) for k, v in value.items()}
        return value
