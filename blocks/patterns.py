"""The regular expressions of inline JSON Schemas (`pattern`, `patternProperties`), matched by RE2 in linear time.

A schema may come from anyone who can post an agent, and Python's `re` backtracks: `^(a+)+$` against 25 characters
took seconds of the event loop's time, doubling with each character. RE2 (`google-re2`) matches in time linear in
the text whatever the pattern, so no pattern can stall the daemon. It has no lookaround and no backreferences,
which the JSON Schema specification's recommended subset of regular expressions leaves out as well: a schema that
uses them is refused when it is read, with the pattern and the reason. `jsonschema` otherwise matches with `re`
in four places; three are replaced here (`pattern`, `patternProperties`, `additionalProperties`), and the fourth,
`unevaluatedProperties` beside `patternProperties`, is refused when the schema is read.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

# The largest compiled pattern accepted: matching is linear in the text, but with the program's size as its factor
# once RE2's automaton cache runs out ('[a-z]{1,1000}' twenty times: 40,000 instructions, 0.5 s against 5,000
# characters); real patterns compile to tens or hundreds, and 5,000 matches 100,000 characters in milliseconds.
MAX_PROGRAM_SIZE = 5000
# Values that are data, not schemas: a "pattern" key inside them is not a regular expression.
_DATA_KEYWORDS = frozenset(("const", "enum", "default", "examples"))


@functools.lru_cache(maxsize=1024)
def compiled(pattern: str) -> Any:
    """The RE2 program of `pattern` (cached); ValueError saying why RE2 cannot run it."""
    import re2

    options = re2.Options()
    options.log_errors = False  # the reason is in the exception; RE2 would also write it to stderr
    try:
        program = re2.compile(pattern, options)
    except re2.error as exc:
        why = exc.args[0].decode(errors="replace") if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise ValueError(
            f"pattern {pattern!r} is refused ({why}): patterns are matched in linear time by RE2, which has no "
            "lookaround and no backreferences (nor has the JSON Schema recommended regular-expression subset)"
        ) from None
    if program.programsize > MAX_PROGRAM_SIZE:
        raise ValueError(
            f"pattern {pattern!r} is refused: it compiles to {program.programsize} instructions, at most "
            f"{MAX_PROGRAM_SIZE} are allowed (large counted repetitions such as {{1,1000}} repeated make it so)"
        )
    return program


def search(pattern: str, text: str) -> bool:
    """Whether `pattern` matches anywhere in `text` (JSON Schema's rule: not anchored unless it says so)."""
    return compiled(pattern).search(text) is not None


def check_patterns(schema: Any, path: str = "") -> None:
    """Every regular expression of `schema` compiles under RE2, and no keyword would match one with Python's `re`;
    otherwise ValueError saying where and why."""
    for where, pattern in _patterns(schema, path):
        try:
            compiled(pattern)
        except ValueError as exc:
            raise ValueError(f"not a valid JSON Schema at {where or '(top level)'}: {exc}") from None
    if _uses(schema, "patternProperties") and _uses(schema, "unevaluatedProperties"):
        raise ValueError(
            "not a valid JSON Schema: unevaluatedProperties beside patternProperties is not supported "
            "(use additionalProperties)"
        )


def _patterns(schema: Any, path: str) -> Iterator[tuple[str, str]]:
    """(where, pattern) for every `pattern` and `patternProperties` key in a schema, nested schemas included."""
    if isinstance(schema, list):
        for index, item in enumerate(schema):
            yield from _patterns(item, f"{path}[{index}]")
        return
    if not isinstance(schema, Mapping):
        return
    for key, value in schema.items():
        where = f"{path}.{key}" if path else str(key)
        if key in _DATA_KEYWORDS:
            continue
        if key == "pattern" and isinstance(value, str):
            yield where, value
        elif key == "patternProperties" and isinstance(value, Mapping):
            yield from ((f"{where}.{name}", name) for name in value)
        yield from _patterns(value, where)


def _uses(schema: Any, keyword: str) -> bool:
    if isinstance(schema, list):
        return any(_uses(item, keyword) for item in schema)
    if not isinstance(schema, Mapping):
        return False
    return keyword in schema or any(_uses(v, keyword) for k, v in schema.items() if k not in _DATA_KEYWORDS)


def validator_class() -> type[Validator]:
    """Draft 2020-12's validator with its regular-expression keywords on RE2 (imports jsonschema)."""
    return _validator_class()


@functools.cache
def _validator_class() -> type[Validator]:
    from jsonschema import Draft202012Validator, ValidationError, validators

    def pattern(validator: Any, expected: str, instance: Any, schema: Any) -> Iterator[ValidationError]:
        if validator.is_type(instance, "string") and not search(expected, instance):
            yield ValidationError(f"{instance!r} does not match {expected!r}")

    def pattern_properties(validator: Any, properties: Any, instance: Any, schema: Any) -> Iterator[Any]:
        if not validator.is_type(instance, "object"):
            return
        for expected, subschema in properties.items():
            for key, value in instance.items():
                if search(expected, key):
                    yield from validator.descend(value, subschema, path=key, schema_path=expected)

    def additional_properties(validator: Any, allowed: Any, instance: Any, schema: Any) -> Iterator[Any]:
        if not validator.is_type(instance, "object"):
            return
        known, patterns = schema.get("properties", {}), list(schema.get("patternProperties", {}))
        extras = [k for k in instance if k not in known and not any(search(p, k) for p in patterns)]
        if validator.is_type(allowed, "object"):
            for extra in extras:
                yield from validator.descend(instance[extra], allowed, path=extra)
        elif not allowed and extras:  # jsonschema's own messages
            listed = ", ".join(repr(extra) for extra in sorted(extras))
            if patterns:
                verb = "does" if len(extras) == 1 else "do"
                regexes = ", ".join(repr(p) for p in sorted(patterns))
                yield ValidationError(f"{listed} {verb} not match any of the regexes: {regexes}")
            else:
                verb = "was" if len(extras) == 1 else "were"
                yield ValidationError(f"Additional properties are not allowed ({listed} {verb} unexpected)")

    # types-jsonschema leaves `extend` untyped; it returns a validator class like the one it extends.
    extended: type[Validator] = validators.extend(  # type: ignore[no-untyped-call]  # the stubs give it no types
        Draft202012Validator,
        {"pattern": pattern, "patternProperties": pattern_properties, "additionalProperties": additional_properties},
    )
    return extended
