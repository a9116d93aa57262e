"""Text in, placeholders out: the recognisers' matches replaced by `[kind#n]`, numbered by a `PlaceholderBook`."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from pagemind.runtime.privacy.book import Entry, PlaceholderBook
from pagemind.runtime.privacy.recognisers import Span, find_spans

# A placeholder as written: never matched by a recogniser, so redacting redacted text changes nothing.
PLACEHOLDER = re.compile(r"\[(phone|email|card|cn_id|passport|iban|ip|address)#(\d+)\]")


@dataclass(frozen=True)
class Redaction:
    """A text with its matches replaced, the matches (offsets into the original), and the numbers newly given."""

    text: str
    spans: tuple[Span, ...]
    new: tuple[Entry, ...]


def redact(text: str, kinds: Iterable[str], book: PlaceholderBook) -> Redaction:
    """`text` with every match of `kinds` replaced by its placeholder (see `recognisers.find_spans`)."""
    spans = find_spans(text, kinds) if text else []
    if not spans:
        return Redaction(text, (), ())
    new: list[Entry] = []
    parts, at = [], 0
    for span in spans:
        parts += [text[at : span.start], f"[{span.kind}#{book.number(span.kind, span.value, new)}]"]
        at = span.end
    parts.append(text[at:])
    return Redaction("".join(parts), tuple(spans), tuple(new))


def redact_arguments(arguments: str, kinds: Iterable[str], book: PlaceholderBook, new: list[Entry]) -> str:
    """A tool call's JSON arguments with every string inside redacted (parsed, so text written as `\\u` escapes is
    seen as text); arguments that are not JSON are redacted as text. Unchanged arguments keep their exact form."""
    kinds = tuple(kinds)
    try:
        parsed = json.loads(arguments)
    except ValueError:
        result = redact(arguments, kinds, book)
        new += result.new
        return result.text
    changed = redact_value(parsed, kinds, book, new)
    return arguments if changed == parsed else json.dumps(changed, ensure_ascii=False)


def redact_value(value: Any, kinds: tuple[str, ...], book: PlaceholderBook, new: list[Entry]) -> Any:
    """A JSON value with every string in it (keys of objects too) redacted."""
    if isinstance(value, str):
        result = redact(value, kinds, book)
        new += result.new
        return result.text
    if isinstance(value, list):
        return [redact_value(item, kinds, book, new) for item in value]
    if isinstance(value, dict):
        return {redact_value(k, kinds, book, new): redact_value(v, kinds, book, new) for k, v in value.items()}
    return value
