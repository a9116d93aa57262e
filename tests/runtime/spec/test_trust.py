"""`spec.trust`: every reference to code in a spec — a custom tool, a block's schema by module — passes one check,
so a client's spec names none (refused, nothing imported) and a shared one's stay text (never imported)."""

from __future__ import annotations

import json
import sys

import pytest
from pydantic import ValidationError

from pagemind.runtime.spec.agent import AgentSpec
from pagemind.runtime.spec.trust import REFUSED
from pagemind.runtime.testing.specs import spec_data


def _with_references(module: str) -> dict:
    data = spec_data("trusty", tools=["send_message", f"{module}:tool"])
    data["blocks"].append({"label": "profile", "schema": f"{module}:Model", "value": "{}", "limit": 100})
    return data


def test_a_clients_spec_names_no_code_and_imports_nothing(monkeypatch):
    monkeypatch.delitem(sys.modules, "this", raising=False)
    with pytest.raises(ValidationError) as caught:
        AgentSpec.model_validate(_with_references("this"), context={"trust": "client"})
    refused = [e for e in caught.value.errors() if e["type"] == REFUSED]
    assert {e["loc"][0] for e in refused} == {"tools", "blocks"}  # the tool and the schema, each refused
    assert "this" not in sys.modules


def test_a_shared_specs_references_stay_text(monkeypatch):
    monkeypatch.delitem(sys.modules, "this", raising=False)
    spec = AgentSpec.model_validate(_with_references("this"), context={"trust": "shared"})
    assert spec.tools[-1] == "this:tool" and spec.blocks[-1].schema_ == "this:Model"
    assert "this" not in sys.modules


def _everywhere(schema: dict, node: dict, defs: dict, depth: int = 0) -> object:
    """A document with `this:Anything` in every place the schema takes a string, as deep as its models go."""
    if "$ref" in node:
        return _everywhere(schema, defs[node["$ref"].split("/")[-1]], defs, depth)
    if depth > 8:
        return "this:Anything"
    options = node.get("anyOf") or node.get("oneOf")
    if options:
        ranked = sorted(options, key=lambda o: "$ref" not in o and o.get("type") not in ("object", "array"))
        return _everywhere(schema, ranked[0], defs, depth)
    kind = node.get("type")
    if kind == "object" and "properties" in node:
        return {k: _everywhere(schema, v, defs, depth + 1) for k, v in node["properties"].items()}
    if kind == "object":
        extra = node.get("additionalProperties")
        inner = _everywhere(schema, extra, defs, depth + 1) if isinstance(extra, dict) else "this:Anything"
        return {"this:Anything": inner}
    if kind == "array":
        return [_everywhere(schema, node.get("items") or {}, defs, depth + 1)]
    return "this:Anything"


def test_no_field_of_a_clients_spec_imports_what_it_names(monkeypatch):
    """Every field a spec has, now or later, gets a reference to code: validating it as a client's imports nothing
    (a field that imported by name without `code_reference` would import `this` here)."""
    monkeypatch.delitem(sys.modules, "this", raising=False)
    schema = AgentSpec.model_json_schema()
    document = _everywhere(schema, schema, schema.get("$defs", {}))
    assert isinstance(document, dict) and "this:Anything" in json.dumps(document["blocks"])
    with pytest.raises(ValidationError):
        AgentSpec.model_validate(document, context={"trust": "client"})
    assert "this" not in sys.modules
