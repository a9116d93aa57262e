"""`spec.trust`: every reference to code in a spec — a custom tool, a block's schema by module — passes one check,
so a client's spec names none (refused, nothing imported) and a shared one's stay text (never imported)."""

from __future__ import annotations

import sys

import pytest
from pydantic import ValidationError

from pagemind.runtime.spec.agent import AgentSpec
from pagemind.runtime.spec.trust import REFUSED
from pagemind.runtime.testing.doubles import spec_data


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
