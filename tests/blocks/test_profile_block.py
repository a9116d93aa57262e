"""Structured core blocks (`schema:` in the block YAML): checked seeds, checked edits, merge patches, rendering."""

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pagemind.blocks import Block, BlockEditError, BlockSchema, CoreMemory, compact_view, merge_patch, updated_value
from pagemind.blocks.profiles import CompanionProfile
from pagemind.runtime.agent import Agent
from pagemind.runtime.compiler import ContextInputs, MemoryStats, compile_context, render_block
from pagemind.runtime.loop import run_turn
from pagemind.runtime.spec.loading import SpecError, load_spec, parse_spec
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.models import ScriptedModel
from pagemind.runtime.testing.responses import tool_call_body as tool_call
from pagemind.runtime.testing.specs import build_spec, spec_data
from pagemind.runtime.testing.step_context import tool_context
from pagemind.runtime.trace.reader import read_trace
from pagemind.runtime.trace.recorder import record
from pagemind.runtime.trace.replay import format_report, replay
from pagemind.runtime.turn_outcomes import StopReason
from pagemind.tools import BUILTIN_TOOLS, ToolCall, dispatch_tool_calls

T = datetime(2026, 5, 1, tzinfo=UTC)
INLINE = {
    "type": "object",
    "additionalProperties": False,
    "required": ["name"],
    "properties": {
        "name": {"type": "string"},
        "age": {"type": "integer", "minimum": 0},
        "likes": {"type": "array", "items": {"type": "string"}},
    },
}
COMPANION = "pagemind.blocks.profiles:CompanionProfile"


def inline_block(value: str = '{"name":"Mia"}', limit: int = 200) -> Block:
    return Block("profile", value, limit, schema=BlockSchema.inline(INLINE))


def profile_block(value: str = "{}") -> Block:
    return Block("profile", value, 2000, schema=BlockSchema.resolve(COMPANION))


def refused(block: Block, changes: dict) -> str:
    with pytest.raises(BlockEditError) as err:
        updated_value(block, changes)
    return str(err.value)


# -- merge patches and checked edits ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "target, patch, result",
    [  # RFC 7386, appendix A
        ({"a": "b"}, {"a": "c"}, {"a": "c"}),
        ({"a": "b"}, {"b": "c"}, {"a": "b", "b": "c"}),
        ({"a": "b"}, {"a": None}, {}),
        ({"a": [{"b": "c"}]}, {"a": [1]}, {"a": [1]}),
        ({"a": {"b": "c"}}, {"a": {"b": "d", "c": None}}, {"a": {"b": "d"}}),
        (["a", "b"], {"a": "c"}, {"a": "c"}),
        ({"e": None}, {"a": 1}, {"e": None, "a": 1}),
        ({}, {"a": {"bb": {"ccc": None}}}, {"a": {"bb": {}}}),
    ],
)
def test_merge_patch_follows_rfc_7386(target, patch, result):
    before = json.dumps(target)
    assert merge_patch(target, patch) == result
    assert json.dumps(target) == before  # the target is not changed in place


def test_an_update_merges_the_patch_and_stores_compact_json():
    mem = CoreMemory([inline_block('{"name":"Mia","likes":["tea"]}')])
    mem.update("profile", {"age": 31, "likes": ["tea", "jazz"]}, T)
    assert mem.get("profile").value == '{"name":"Mia","likes":["tea","jazz"],"age":31}'
    mem.update("profile", {"likes": None}, T)
    assert json.loads(mem.get("profile").value) == {"name": "Mia", "age": 31}
    assert [e.operation for e in mem.pending] == ["update", "update"]


def test_a_patch_that_breaks_an_inline_schema_names_the_field_and_changes_nothing():
    block = inline_block()
    assert "age: 'old' is not of type 'integer'" in refused(block, {"age": "old"})
    assert "likes[1]: 3 is not of type 'string'" in refused(block, {"likes": ["tea", 3]})
    assert "'nickname' was unexpected" in refused(block, {"nickname": "M"})
    assert "'name' is a required property" in refused(block, {"name": None})
    message = refused(block, {"age": -1})
    assert "age: -1 is less than the minimum of 0" in message and "Its fields: name, age, likes" in message


def test_a_patch_that_breaks_a_pydantic_model_names_the_field():
    block = profile_block()
    assert "people.Ann.relation: Field required" in refused(block, {"people": {"Ann": {"notes": "neighbour"}}})
    assert "dates.exam: String should match pattern" in refused(block, {"dates": {"exam": "next Friday"}})
    assert "nickname: Extra inputs are not permitted" in refused(block, {"nickname": "M"})
    value = updated_value(
        block, {"name": "Mia", "people": {"Leo": {"relation": "brother"}}, "dates": {"Leo's birthday": "03-14"}}
    )
    patched = updated_value(
        Block("profile", value, 2000, schema=block.schema), {"people": {"Ann": {"relation": "aunt"}}}
    )
    assert CompanionProfile.model_validate_json(patched).people.keys() == {"Leo", "Ann"}  # Leo kept


def test_text_edits_of_a_structured_block_are_checked_too():
    mem = CoreMemory([inline_block()])
    with pytest.raises(BlockEditError, match="structured .*core_memory_update"):
        mem.append("profile", "Likes tea", T)
    with pytest.raises(BlockEditError, match=r"not valid JSON \(.* at line 1 column"):
        mem.replace("profile", '"Mia"}', '"Mia"', T)
    with pytest.raises(BlockEditError, match="age: 'x' is not of type 'integer'"):
        mem.rethink("profile", '{"name": "Mia", "age": "x"}', T)
    mem.replace("profile", '"Mia"', '"Mia Chen"', T)
    mem.rethink("profile", '{ "name": "Mia",\n  "age": 3 }', T)
    assert mem.get("profile").value == '{"name":"Mia","age":3}' and len(mem.pending) == 2


def test_the_limit_counts_the_stored_json_and_plain_blocks_refuse_updates():
    with pytest.raises(BlockEditError, match="limit is 30"):
        updated_value(inline_block(limit=30), {"likes": ["green tea", "jazz"]})
    with pytest.raises(BlockEditError, match="plain text"):
        updated_value(Block("human", "Name: Lin", 100), {"name": "Lin"})
    with pytest.raises(BlockEditError, match="read-only"):
        updated_value(Block("profile", "{}", 100, read_only=True, schema=BlockSchema.inline(INLINE)), {"name": "x"})


def test_a_block_holding_text_from_before_its_schema_asks_for_a_rewrite():
    with pytest.raises(BlockEditError, match="not JSON .*memory_rethink"):
        updated_value(profile_block("Name: Lin"), {"name": "Lin"})
    assert compact_view("Name: Lin") == "Name: Lin"  # shown as it is meanwhile


async def test_the_tool_takes_changes_sent_as_a_json_string():
    context = tool_context(core_memory=CoreMemory([profile_block()]))
    calls = [
        ToolCall("c1", "core_memory_update", json.dumps({"label": "profile", "changes": '{"name": "Mia"}'})),
        ToolCall("c2", "core_memory_update", json.dumps({"label": "profile", "changes": "Mia"})),
    ]
    ok, bad = await dispatch_tool_calls(calls, BUILTIN_TOOLS, context)
    assert not ok.is_error and context.core_memory.get("profile").value == '{"name":"Mia"}'
    assert bad.is_error and "changes: Input should be a valid dictionary" in bad.content


# -- the agent YAML ----------------------------------------------------------------------------------------------

YAML = """\
name: x
model: {{name: gpt-4o-mini}}
system: be kind
blocks:
  - label: human
  - label: profile
    schema: {schema}
    value: {value}
"""


def spec_problems(schema: str, value: str = '""') -> str:
    with pytest.raises(SpecError) as err:
        parse_spec(YAML.format(schema=schema, value=value), "agent.yaml")
    return str(err.value)


def test_both_schema_forms_load_and_seeds_become_compact_json():
    inline = parse_spec(YAML.format(schema=json.dumps(INLINE), value="{name: Mia, likes: [tea]}"))
    assert inline.blocks[1].value == '{"name":"Mia","likes":["tea"]}'
    assert inline.blocks[1].block_schema().fields() == ["name", "age", "likes"]
    model = parse_spec(YAML.format(schema=COMPANION, value='""'))
    assert model.blocks[1].value == "{}" and model.blocks[1].block_schema().model is CompanionProfile
    assert model.blocks[0].block_schema() is None and not model.blocks[0].ephemeral


def test_bad_schemas_and_seeds_are_spec_errors_naming_file_line_and_field():
    assert "agent.yaml:7 blocks[1].schema: cannot import module 'no_such_mod'" in spec_problems("no_such_mod:Model")
    assert "blocks[1].schema: module 'pagemind.blocks.profiles' has no attribute 'Nope'" in spec_problems(
        "pagemind.blocks.profiles:Nope"
    )
    assert "has no pydantic model 'Date'" in spec_problems("pagemind.blocks.profiles:Date")
    assert "blocks[1].schema: 'profiles' is not a schema reference" in spec_problems("profiles")
    assert "blocks[1].schema: not a valid JSON Schema at type" in spec_problems('{"type": "thing"}')
    assert "agent.yaml:8 blocks[1].value: not JSON" in spec_problems(COMPANION, "'Mia, likes tea'")
    message = spec_problems(COMPANION, "{people: {Leo: {}}}")
    assert "blocks[1].value: does not match the block's schema: people.Leo.relation: Field required" in message


def test_a_spec_from_elsewhere_does_not_import_the_schema_module():
    text = YAML.format(schema="no_such_mod:Model", value='""')
    spec = parse_spec(text, "trace", import_tools=False)
    assert spec.blocks[1].schema_ == "no_such_mod:Model"
    with pytest.raises(ValueError, match="schema: cannot import module"):
        spec.blocks[1].block_schema()


def test_structure_fields_leave_existing_fingerprints_alone():
    plain = build_spec()
    structured = build_spec(blocks=[{"label": "profile", "schema": COMPANION}])
    assert plain.spec_hash() == "3efac6040d76d9d2" != structured.spec_hash()  # as before blocks had these fields
    assert (
        build_spec(blocks=[{"label": "notes", "ephemeral": True}]).spec_hash()
        != build_spec(blocks=[{"label": "notes"}]).spec_hash()
    )
    dumped = json.loads(structured.model_dump_json())["blocks"][0]
    assert dumped["schema"] == COMPANION  # stored specs use the YAML's key
    assert parse_spec(json.dumps(json.loads(structured.model_dump_json()))).spec_hash() == structured.spec_hash()


# -- rendering ---------------------------------------------------------------------------------------------------


def test_a_structured_block_renders_compactly_with_its_fields():
    value = json.dumps(
        {
            "name": "Mia",
            "preferences": {},
            "people": {"Leo": {"relation": "brother", "notes": None}},
            "health": {"peanuts": "severe allergy"},
            "situations": {},
        }
    )
    stored = updated_value(profile_block(), json.loads(value))
    text = render_block(profile_block(stored))
    assert f'chars="{len(stored)}/2000" format="json"' in text
    assert "<fields>\nname: string — what to call the user\n" in text
    assert "people: {key: {relation, notes}} — people who matter, keyed by name" in text
    assert (
        '<value>\nname: Mia\npeople: {"Leo":{"relation":"brother"}}\nhealth: {"peanuts":"severe allergy"}\n</value>'
    ) in text
    assert "null" not in text.split("<value>")[1]
    assert compact_view("{}") == "{}" and compact_view("[1, null]") == "[1]" and compact_view("not json") == "not json"


def test_compiled_prompt_holds_the_compact_value():
    block = inline_block('{"name":"Mia","likes":[],"age":null}')
    stats = MemoryStats(T, recall_count=0, in_context_count=0)
    system = compile_context(ContextInputs("Be kind.", (block,), (), stats)).messages[0]["content"]
    assert '<block label="profile" chars="36/200" format="json">' in system
    assert "<value>\nname: Mia\n</value>" in system and "likes" in system.split("<value>")[0]


# -- through a turn and the store ----------------------------------------------------------------------------------


def structured_spec(**extra):
    blocks = [
        {"label": "persona", "value": "I am kind.", "limit": 200},
        {"label": "profile", "schema": COMPANION, "limit": 600, "value": {"name": "Mia"}},
    ]
    tools = ["send_message", "core_memory_update", "memory_rethink"]
    return build_spec(blocks=blocks, tools=tools, **extra)


async def test_a_bad_update_is_a_tool_error_naming_the_field_and_the_turn_goes_on(make_agent, database_url):
    model = ScriptedModel(
        [
            tool_call("core_memory_update", {"label": "profile", "changes": {"dates": {"exam": "soon"}}}),
            tool_call(
                "core_memory_update",
                {"label": "profile", "changes": {"dates": {"exam": "2026-06-02"}, "situations": {"exams": "revising"}}},
            ),
            tool_call("send_message", {"message": "Good luck!"}),
        ]
    )
    agent = await make_agent(database_url, model, structured_spec())
    result = await run_turn(agent, "My exam is on June 2nd.")
    assert (result.reply, result.stop_reason) == ("Good luck!", StopReason.SEND_MESSAGE)
    error = model.requests[1].messages[-2]  # the last message before the closing one
    assert error["role"] == "tool" and "dates.exam: String should match pattern" in error["content"]
    assert "Nothing was changed" in error["content"]
    assert "Updated. Block 'profile' now holds" in model.requests[2].messages[-2]["content"]
    fresh = await Agent.load(agent.spec, store=StateStore(make_engine(database_url)))
    stored = json.loads(fresh.memory.get("profile").value)
    assert stored == {"name": "Mia", "dates": {"exam": "2026-06-02"}, "situations": {"exams": "revising"}}
    assert fresh.memory.get("profile").schema == agent.memory.get("profile").schema is not None
    history = fresh.store.block_history(fresh.record.id, "profile")
    assert [h.operation for h in history] == ["update"]  # the refused patch left no version


async def test_the_shipped_companion_loads_with_a_profile_and_a_session_block(make_agent, sqlite_url):
    spec = load_spec(Path(__file__).parents[2] / "agents" / "companion.yaml")
    agent = await make_agent(sqlite_url, ScriptedModel(), spec)
    profile, session = agent.memory.get("profile"), agent.memory.get("session")
    assert profile.schema.model is CompanionProfile and profile.value == "{}" and not profile.ephemeral
    assert session.ephemeral and session.schema is None
    assert "core_memory_update" in agent.tools and "core_memory_update" in spec.system
    system = agent.compile().messages[0]["content"]
    assert 'label="profile" chars="2/2500" format="json"' in system and "situations: {key: string}" in system
    assert 'label="session" chars="0/600" ephemeral="cleared when this session ends"' in system


async def test_a_turn_that_updates_a_structured_block_replays_identically(make_agent, sqlite_url, tmp_path):
    model = ScriptedModel(
        [
            tool_call("core_memory_update", {"label": "profile", "changes": {"health": {"peanuts": "allergic"}}}),
            tool_call("core_memory_update", {"label": "profile", "changes": {"health": "none"}}),  # refused
            tool_call("send_message", {"message": "Noted."}),
        ]
    )
    agent = await make_agent(sqlite_url, model, structured_spec())
    recorder = record(agent, path=tmp_path / "turn.jsonl")
    await run_turn(agent, "I'm allergic to peanuts.")
    recorder.close()
    report = await replay(read_trace(tmp_path / "turn.jsonl"))
    assert (report.status, report.steps) == ("identical", 3), format_report(report)


def test_the_memory_command_marks_structured_and_ephemeral_blocks(tmp_path):
    from tests.runtime.cli.test_cli import pagemind

    memory = pagemind(tmp_path, "memory", "agents/companion.yaml")
    assert memory.returncode == 0, memory.stderr
    assert "[profile] 2/2500 chars, structured, 0 edit(s)\n  {}" in memory.stdout
    assert "[session] 0/600 chars, ephemeral, 0 edit(s)" in memory.stdout
    by_name = pagemind(tmp_path, "context", "companion", "--json")  # from the stored spec, schema included
    assert by_name.returncode == 0 and 'format=\\"json\\"' in by_name.stdout


def test_an_untrusted_replay_leaves_off_a_schema_module_from_elsewhere(tmp_path):
    from types import SimpleNamespace

    from pagemind.runtime.trace.format import BlockSnapshot
    from pagemind.runtime.trace.replay import replay_spec

    data = spec_data(blocks=[{"label": "profile", "schema": COMPANION}, {"label": "notes", "schema": "elsewhere:M"}])
    snapshot = SimpleNamespace(
        blocks=[
            BlockSnapshot(label=label, value="{}", limit=100, description="", read_only=False)
            for label in ("profile", "notes")
        ]
    )
    trace = SimpleNamespace(path=tmp_path / "t.jsonl", header=SimpleNamespace(spec=data, snapshot=snapshot))
    assert [b.schema_ for b in replay_spec(trace, trust_tools=False).blocks] == [COMPANION, None]
