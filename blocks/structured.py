"""Values of structured blocks: JSON checked against the block's schema, RFC 7386 merge patches, compact rendering.

A structured block stores compact JSON (no spaces, keys as written), so its `chars/limit` counts what is stored.
"""

from __future__ import annotations

import functools
import json
from typing import Any

from pagemind.blocks.errors import BlockEditError
from pagemind.blocks.schema import BlockSchema

_EMPTY: tuple[Any, ...] = (None, "", [], {})


def dump_json(data: Any) -> str:
    """The stored form of a structured value: compact JSON, non-ASCII kept as is."""
    return json.dumps(data, ensure_ascii=False, separators=(",", ":"))


def parse_json(label: str, text: str) -> Any:
    """A structured block's text as JSON; raises BlockEditError saying where it stops being JSON."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise BlockEditError(
            f"Edit refused: block '{label}' holds JSON, and the new value is not valid JSON ({exc.msg} at line "
            f"{exc.lineno} column {exc.colno}). Change its fields with core_memory_update instead."
        ) from None


def checked_json(label: str, schema: BlockSchema, text: str) -> str:
    """`text` as the stored JSON of a block with this schema; raises BlockEditError naming each failing field and
    what it expected (the block is left as it was)."""
    data = parse_json(label, text)
    problems = schema.problems(data)
    if problems:
        raise BlockEditError(
            f"Edit refused: block '{label}' must match its schema; the new value breaks it at "
            f"{schema.explain(problems)} Nothing was changed."
        )
    return dump_json(data)


def merge_patch(target: Any, patch: Any) -> Any:
    """`target` with the RFC 7386 JSON merge patch applied: an object merges key by key, null removes a key, and
    anything else (a list, a string) replaces the target whole. Neither argument is changed."""
    if not isinstance(patch, dict):
        return patch
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def patched_json(label: str, current: str, changes: Any) -> str:
    """The JSON after merging `changes` into `current` (not yet checked against the schema: the caller's edit
    check does that, once); raises BlockEditError when `changes` or `current` cannot be merged."""
    if not isinstance(changes, dict):
        raise BlockEditError(
            f"changes must be a JSON object of the fields to set (null removes a field), e.g. "
            f'{{"name": "Mia"}}; got {type(changes).__name__}.'
        )
    try:
        base = json.loads(current) if current.strip() else {}
    except json.JSONDecodeError:  # text stored before the block had a schema
        raise BlockEditError(
            f"Block '{label}' holds text that is not JSON (written before it had a schema), so it "
            "cannot be patched; rewrite it whole as JSON with memory_rethink."
        ) from None
    return dump_json(merge_patch(base, changes))


def _pruned(data: Any) -> Any:
    if isinstance(data, dict):
        kept = {k: _pruned(v) for k, v in data.items()}
        return {k: v for k, v in kept.items() if v not in _EMPTY}
    if isinstance(data, list):
        return [item for item in map(_pruned, data) if item not in _EMPTY]
    return data


def _inline(value: Any) -> str:
    if isinstance(value, str) and "\n" not in value:
        return value
    return dump_json(value)


@functools.lru_cache(maxsize=1024)
def compact_view(text: str) -> str:
    """How a structured value reads in the prompt: nulls and empty values left out, one top-level field per line
    as `field: value` (strings bare, anything else compact JSON). Text that is not JSON is shown as it is."""
    try:
        data = _pruned(json.loads(text))
    except json.JSONDecodeError:
        return text
    if not isinstance(data, dict):
        return dump_json(data)
    return "\n".join(f"{key}: {_inline(value)}" for key, value in data.items()) or "{}"
