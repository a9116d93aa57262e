"""Configuration in tiers (issue #32): the product knobs, presets, `advanced:`, old names, descriptions."""

from __future__ import annotations

import json
import textwrap
import types
import typing
from pathlib import Path
from typing import Any

import pytest
import structlog
from pydantic import BaseModel

from pagemind.runtime.spec.agent import AgentSpec
from pagemind.runtime.spec.loading import SpecError, load_spec, parse_spec
from pagemind.runtime.spec.memory import ArchivalConfig, MemoryConfig, PressureConfig, SalienceConfig
from pagemind.runtime.spec.presets import PRESETS
from pagemind.runtime.spec.renames import RENAMED

ROOT = Path(__file__).parents[3]
BASE = {"name": "a", "model": {"name": "m"}, "system": "s"}
HEAD = "name: a\nmodel:\n  name: m\nsystem: s\n"


def nested_models(annotation: Any) -> list[type[BaseModel]]:
    """The models a field holds, through Optional, unions, lists and Annotated."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    if isinstance(annotation, (types.UnionType, typing._GenericAlias)) or typing.get_origin(annotation):  # type: ignore[attr-defined]
        return [m for arg in typing.get_args(annotation) for m in nested_models(arg)]
    return []


def leaves(model: type[BaseModel], prefix: str = "", skip: str | None = None) -> list[str]:
    """The YAML leaf paths under `model` (a list's items counted once), leaving out fields named `skip`."""
    found = []
    for name, info in model.model_fields.items():
        if name == skip:
            continue
        inner = nested_models(info.annotation)
        if inner:
            found += [leaf for m in inner for leaf in leaves(m, f"{prefix}{name}.", skip)]
        else:
            found.append(prefix + name)
    return found


def all_fields(model: type[BaseModel], prefix: str = "") -> list[tuple[str, Any]]:
    found = []
    for name, info in model.model_fields.items():
        found.append((prefix + name, info))
        for inner in nested_models(info.annotation):
            found += all_fields(inner, f"{prefix}{name}.")
    return found


def knobs(model: type[BaseModel], prefix: str = "") -> list[str]:
    """The knobs a user decides on: `leaves` outside `advanced`, except that an optional section that is off
    unless written (`model.prices`, `idle`) is one decision until it is written."""
    found = []
    for name, info in model.model_fields.items():
        optional = info.default is None and type(None) in typing.get_args(info.annotation)
        inner = nested_models(info.annotation)
        if name in ("advanced", "mcp_servers"):
            # An MCP server is written as a `tools:` entry (`spec.mcp`): its fields say where tools come from, not
            # how the agent behaves, so they count with `tools`, not as knobs.
            continue
        if inner and not optional:
            found += [knob for m in inner for knob in knobs(m, f"{prefix}{name}.")]
        else:
            found.append(prefix + name)
    return found


def test_the_yaml_a_user_writes_has_at_most_38_knobs_outside_advanced():
    outside = knobs(AgentSpec)
    # 35 when the tiers were made (issue 32), and what a user must see of the features since: the `privacy:`
    # section (issue 35: pii, kinds, keep_originals), `memory.review` (issue 35: one knob, per kind inside) and
    # `model.system_messages` (issue 36: a trait of the model's
    # chat template)
    assert len(outside) <= 38, outside
    assert [knob for knob in outside if knob.startswith("privacy.")] == [
        "privacy.pii",
        "privacy.kinds",
        "privacy.keep_originals",
    ]
    assert {"model.prices", "idle"} <= set(outside)  # optional sections: one decision each
    assert [leaf for leaf in leaves(AgentSpec, skip="advanced") if leaf.startswith("memory.")] == [
        "memory.retrieval",
        "memory.memories_per_turn",
        "memory.summarizer_model",
        "memory.review",
    ]
    assert len(leaves(AgentSpec)) > 100  # the tuning is all still there, under memory.advanced


def test_every_field_of_the_spec_has_a_description():
    fields = all_fields(AgentSpec)
    assert len(fields) > 120
    missing = [path for path, info in fields if not (info.description or "").strip()]
    assert missing == []
    multiline = [path for path, info in fields if "\n" in info.description]
    assert multiline == []


def test_the_new_shape_loads_and_the_runtime_reads_the_resolved_sections():
    spec = AgentSpec.model_validate(
        {
            **BASE,
            "memory": {
                "retrieval": "multilingual",
                "memories_per_turn": 0,
                "advanced": {
                    "pressure": {"flush": 0.8},
                    "extraction": False,
                    "session_gap_hours": 2,
                    "archival": {"candidates": 9, "dedupe_threshold": 0.99},
                    "salience": {"gate_lookup": False, "model": "tiny"},
                    "episodes": {"enabled": False},
                    "reflection": {"every_turns": 4},
                },
            },
        }
    )
    memory = spec.memory
    assert (memory.pressure.flush, memory.extraction, memory.session_gap_hours) == (0.8, False, 2)
    assert (memory.archival.candidates, memory.archival.dedupe_threshold) == (9, 0.99)  # the YAML's value wins
    assert (memory.archival.min_similarity, memory.archival.recall_diversity) == (0.78, 0.0)  # the preset's
    assert (memory.salience.gate_lookup, memory.salience.model) == (False, "tiny")
    assert (memory.episodes.enabled, memory.reflection.every_turns, memory.memories_per_turn) == (False, 4, 0)
    assert memory.advanced.archival.min_similarity == 0.30  # what the YAML said, as it says it
    again = AgentSpec.model_validate_json(spec.model_dump_json())
    assert again == spec and again.spec_hash() == spec.spec_hash()


def test_a_preset_is_a_named_bundle_and_unset_follows_the_embedding_model():
    e5 = PRESETS["multilingual"].archival
    plain = MemoryConfig()
    assert plain.archival == ArchivalConfig() and plain.archival_for({}) == ArchivalConfig()
    assert plain.archival_for(e5).min_similarity == 0.78  # no preset named: the model's own
    english = MemoryConfig(retrieval="default")
    assert english.archival_for(e5) == ArchivalConfig()  # a named preset wins over the model's
    pinned = MemoryConfig(advanced={"archival": {"min_similarity": 0.5}})
    assert pinned.archival_for(e5).min_similarity == 0.5 and pinned.archival_for(e5).dedupe_threshold == 0.97
    assert MemoryConfig(retrieval="multilingual").archival.model_dump() == {**ArchivalConfig().model_dump(), **e5}


def test_the_multilingual_profile_brings_the_multilingual_preset():
    from pagemind.runtime.memory.embedding.profiles import MINILM, MULTILINGUAL_E5

    assert MULTILINGUAL_E5.thresholds == PRESETS["multilingual"].archival
    assert MINILM.thresholds == PRESETS["default"].archival == {}


OLD_AND_NEW = [
    ({"prefetch_top_k": 0}, {"memories_per_turn": 0}),
    (
        {"extraction": False, "pressure": {"flush": 0.8}},
        {"advanced": {"extraction": False, "pressure": {"flush": 0.8}}},
    ),
    (
        {"archival": {"prefetch": 7, "recall_session_gap_hours": 2.5, "dense_weight": 0.4}},
        {"advanced": {"session_gap_hours": 2.5, "archival": {"candidates": 7, "dense_weight": 0.4}}},
    ),
    (
        {"salience": {"prefetch": False, "extraction": False, "model": "tiny"}},
        {"advanced": {"salience": {"gate_lookup": False, "gate_extraction": False, "model": "tiny"}}},
    ),
    (
        {"episodes": {"enabled": False}, "reflection": {"every_turns": 3}},
        {"advanced": {"episodes": {"enabled": False}, "reflection": {"every_turns": 3}}},
    ),
    ({"advanced": {"archival": {"prefetch": 3}}}, {"advanced": {"archival": {"candidates": 3}}}),
]


@pytest.mark.parametrize("old, new", OLD_AND_NEW)
def test_old_names_load_as_their_new_equivalent_with_the_same_hash(old, new):
    was, now = AgentSpec.model_validate({**BASE, "memory": old}), AgentSpec.model_validate({**BASE, "memory": new})
    assert was == now and was.spec_hash() == now.spec_hash()
    for name in ("archival", "salience", "pressure", "budgets", "extraction", "session_gap_hours", "episodes"):
        assert getattr(was.memory, name) == getattr(now.memory, name)


def test_the_hash_is_what_it_was_before_the_tiers():
    # Computed by main before the tiers: stored agents stay "unchanged" (state.agent_load, the daemon's pool).
    assert AgentSpec.model_validate(BASE).spec_hash() == "6706d68c8e55e053"
    old = {**BASE, "memory": {"archival": {"prefetch": 7, "recall_session_gap_hours": 2.5}, "salience": {"model": "t"}}}
    assert AgentSpec.model_validate(old).spec_hash() == "f7449812984ced91"
    assert AgentSpec.model_validate({**BASE, "memory": {"retrieval": "default"}}).spec_hash() != "6706d68c8e55e053"


# The specs the traces in tests/traces held before they were re-recorded in the new shape (a full dump each).
OLD_SHAPE = json.loads((ROOT / "tests" / "golden" / "old_shape_specs.json").read_text(encoding="utf-8"))


@pytest.mark.parametrize("name", sorted(OLD_SHAPE))
def test_a_recorded_spec_in_the_old_shape_loads_and_round_trips(name):
    recorded = OLD_SHAPE[name]
    assert "archival" in recorded["memory"]  # a full dump, in the old shape
    spec = AgentSpec.model_validate(recorded, context={"import_tools": False})
    again = AgentSpec.model_validate(json.loads(spec.model_dump_json()), context={"import_tools": False})
    assert again.spec_hash() == spec.spec_hash() and again.memory.archival == spec.memory.archival
    assert "advanced" in json.loads(spec.model_dump_json())["memory"]  # a new recording: replay reads its salience


def write(tmp_path: Path, memory_yaml: str) -> Path:
    path = tmp_path / "agent.yaml"
    path.write_text(HEAD + "memory:\n" + textwrap.indent(textwrap.dedent(memory_yaml), "  "))
    return path


def test_an_old_name_is_read_with_a_warning_naming_the_file_line_and_new_name(tmp_path):
    path = write(tmp_path, "prefetch_top_k: 2\narchival:\n  prefetch: 9\n")
    with structlog.testing.capture_logs() as logs:
        spec = load_spec(path)
    assert spec.memory.memories_per_turn == 2 and spec.memory.archival.candidates == 9
    warned = {(e["field"], e["new"], e["line"]) for e in logs if e["event"] == "spec_field_renamed"}
    assert warned == {
        ("memory.prefetch_top_k", "memory.memories_per_turn", 6),
        ("memory.archival", "memory.advanced.archival", 7),
        ("memory.archival.prefetch", "memory.advanced.archival.candidates", 8),
    }
    assert all(e["file"] == str(path) and e["log_level"] == "warning" for e in logs)


def test_old_names_in_renamed_sections_are_covered():
    renamed = {old for old, _ in RENAMED}
    assert {"memory.prefetch_top_k", "memory.archival", "memory.salience"} <= renamed
    assert SalienceConfig(prefetch=False).gate_lookup is False  # direct construction reads them too
    assert ArchivalConfig(prefetch=5).candidates == 5


def problems(tmp_path: Path, memory_yaml: str) -> list[str]:
    with pytest.raises(SpecError) as err:
        load_spec(write(tmp_path, memory_yaml))
    return err.value.problems


@pytest.mark.parametrize(
    "memory_yaml, expected",
    [
        ("advanced:\n  archival:\n    bogus: 1\n", ":8 memory.advanced.archival.bogus: unknown key"),
        ("advanced:\n  bogus: 1\n", ":7 memory.advanced.bogus: unknown key"),
        ("retrieval: swahili\n", ":6 memory.retrieval: must be 'default' or 'multilingual'"),
        ("advanced:\n  session_gap_hours: 0\n", ":7 memory.advanced.session_gap_hours: must be greater than 0"),
        # a file with old names is told about the field where it wrote it
        ("archival:\n  bogus: 1\n", ":7 memory.archival.bogus: unknown key"),
        ("archival:\n  prefetch: 0\n", ":7 memory.archival.prefetch: must be greater than 0"),
        ("archival:\n  recall_session_gap_hours: -1\n", ":7 memory.archival.recall_session_gap_hours: must be greater"),
        ("salience:\n  extraction: maybe\n", ":7 memory.salience.extraction: must be a valid boolean"),
        ("prefetch_top_k: 99\n", ":6 memory.prefetch_top_k: must be less than or equal to 20"),
        ("prefetch_top_k: 1\nmemories_per_turn: 2\n", ":6 memory.prefetch_top_k: the old name of memories_per_turn"),
        (
            "archival: {}\nadvanced:\n  archival: {}\n",
            ":6 memory.archival: the old place of advanced.archival, which is given too",
        ),
    ],
)
def test_errors_name_file_line_and_field_in_either_spelling(tmp_path, memory_yaml, expected):
    found = problems(tmp_path, memory_yaml)
    assert any(expected in p for p in found), found
    assert all(p.startswith(str(tmp_path / "agent.yaml") + ":") for p in found)


def test_a_section_named_as_the_runtime_reads_it_can_be_replaced_in_a_copy():
    spec = AgentSpec.model_validate({**BASE, "memory": {"retrieval": "multilingual"}})
    narrow = spec.memory.model_copy(update={"pressure": PressureConfig(warn=0.4, flush=0.6, target=0.5)})
    assert narrow.pressure.flush == 0.6 and narrow.advanced.pressure.flush == 0.6
    quiet = spec.memory.model_copy(update={"salience": SalienceConfig(enabled=False)})
    assert quiet.salience.enabled is False and quiet.archival.min_similarity == 0.78


def test_the_api_and_a_yaml_file_take_the_same_text():
    text = HEAD + "memory:\n  retrieval: multilingual\n  advanced:\n    archival: {top_k: 7}\n"
    assert parse_spec(text).memory.archival.top_k == 7


def test_the_budgets_that_were_never_enforced_are_gone_read_with_a_warning(tmp_path):
    """Issue 37: `budgets.system` and `budgets.core` were shown but never enforced; they are no longer read, an old
    file still loads (a warning names the file, line and field), and the hash stays what it was."""
    path = write(tmp_path, "advanced:\n  budgets:\n    system: 1000\n    core: 1500\n    summary: 900\n")
    with structlog.testing.capture_logs() as logs:
        spec = load_spec(path)
    assert spec.memory.budgets.summary == 900 and not hasattr(spec.memory.budgets, "system")
    removed = {(e["field"], e["line"]) for e in logs if e["event"] == "spec_field_removed"}
    assert removed == {("memory.advanced.budgets.system", 8), ("memory.advanced.budgets.core", 9)}
    assert all("delete it" in e["hint"] for e in logs if e["event"] == "spec_field_removed")
    plain = AgentSpec.model_validate({**BASE, "memory": {"advanced": {"budgets": {"summary": 900}}}})
    assert spec.spec_hash() == plain.spec_hash()
    old = AgentSpec.model_validate({**BASE, "memory": {"budgets": {"system": 1000, "core": 1500}}})
    assert old.spec_hash() == "6706d68c8e55e053"  # what it was before the tiers
