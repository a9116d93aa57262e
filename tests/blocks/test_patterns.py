"""The regular expressions of inline schemas run on RE2 (issue 34, item 9): a catastrophic-backtracking pattern
answers at once, whatever the text; patterns RE2 cannot run are refused when the schema is read; the keywords that
match patterns (`pattern`, `patternProperties`, `additionalProperties`) keep their meaning."""

from __future__ import annotations

import pytest

from pagemind.blocks import BlockSchema
from pagemind.blocks.patterns import check_patterns

NESTED = "^(a+)+$"  # with Python's `re`, each further "a" before the "!" doubles the work


def test_a_catastrophic_pattern_is_refused_or_matched_in_linear_time():
    schema = BlockSchema.inline({"type": "object", "properties": {"code": {"type": "string", "pattern": NESTED}}})
    # 2**100 steps for a backtracking engine: this returns only because the match is linear.
    assert schema.problems({"code": "a" * 100 + "!"}) == [f"code: '{'a' * 100}!' does not match '{NESTED}'"]
    assert schema.problems({"code": "a" * 100}) == []


def test_patterns_re2_cannot_run_are_refused_when_the_schema_is_read():
    for pattern in ("(?=a)b", r"(a)\1", "(?<!x)y"):
        with pytest.raises(ValueError, match="matched in linear time by RE2, which has no lookaround") as err:
            BlockSchema.inline({"type": "object", "properties": {"x": {"type": "string", "pattern": pattern}}})
        assert "properties.x.pattern" in str(err.value)
    with pytest.raises(ValueError, match="patternProperties.*is refused"):
        BlockSchema.inline({"type": "object", "patternProperties": {"(?=a)": {"type": "string"}}})
    with pytest.raises(ValueError, match="unevaluatedProperties beside patternProperties"):
        BlockSchema.inline({"patternProperties": {"^a": {}}, "unevaluatedProperties": False})
    with pytest.raises(ValueError, match="compiles to 39984 instructions, at most 5000"):
        BlockSchema.inline({"type": "string", "pattern": "[a-z]{1,1000}" * 20})
    check_patterns({"const": {"pattern": "(?=data, not a regex)"}})  # values are data, never compiled


def test_pattern_properties_and_additional_properties_keep_their_meaning():
    schema = BlockSchema.inline(
        {
            "type": "object",
            "properties": {"name": {"type": "string"}},
            "patternProperties": {"^d_[0-9]+$": {"type": "integer"}, NESTED: {"type": "string"}},
            "additionalProperties": False,
        }
    )
    assert schema.problems({"name": "Mia", "d_1": 3, "aaa": "x"}) == []
    assert schema.problems({"d_1": "three"}) == ["d_1: 'three' is not of type 'integer'"]
    assert schema.problems({"other": 1}) == [
        f"(top level): 'other' does not match any of the regexes: '{NESTED}', '^d_[0-9]+$'"
    ]
    assert schema.problems({"a" * 60 + "!": 1}) != []  # a long key against the nested pattern: no backtracking
    open_schema = BlockSchema.inline({"properties": {"a": {}}, "additionalProperties": False})
    assert open_schema.problems({"b": 1, "c": 2}) == [
        "(top level): Additional properties are not allowed ('b', 'c' were unexpected)"
    ]
