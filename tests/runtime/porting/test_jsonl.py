"""`pagemind.agent` JSON Lines: an agent exported and imported is the same agent (its next prompt byte for byte, its
archival searches hit for hit), on SQLite, on Postgres and from one to the other; the format refuses what it cannot
read, and a taken name is refused unless renamed or replaced."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
from sqlalchemy import insert

from pagemind.runtime.agent import Agent
from pagemind.runtime.memory.vectors.records import MemoryRecord
from pagemind.runtime.messages import Message
from pagemind.runtime.porting.export import read_bundle
from pagemind.runtime.porting.files import export_lines
from pagemind.runtime.porting.load import ImportRefused, NameTaken, import_bundle
from pagemind.runtime.porting.records import FORMAT, VERSION, FormatError, parse
from pagemind.runtime.process.settings import Settings
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.state.tables.conversation import SummaryRow
from pagemind.runtime.state.tables.daemon import trigger_fires
from pagemind.runtime.state.tables.memory import reflections
from pagemind.runtime.state.tables.schema import table_of
from pagemind.runtime.testing.responses import reply_body as reply
from pagemind.runtime.testing.responses import tool_call_body as tool_call
from pagemind.runtime.testing.specs import build_spec

TOOLS = ["send_message", "core_memory_append", "core_memory_replace", "archival_memory_insert", "archival_search"]
QUERIES = ["peanut allergy", "where does Lin live", "favourite colour", "sister's wedding in Lyon"]


def keeper():
    return build_spec("keeper", tools=TOOLS)


async def lived_in(url, scripted_openai, clock) -> Agent:
    """An agent with a history: two turns (tool calls and returns, a block edit), older messages only in recall,
    a summary, and archival memories (one superseded)."""
    scripted_openai.add(
        tool_call("core_memory_append", {"label": "human", "content": "Name: Lin."}),
        tool_call("send_message", {"message": "Hello Lin!"}),
        reply("Noted."),
    )
    agent = await Agent.load(keeper(), model=scripted_openai.client(), store=StateStore(make_engine(url)), clock=clock)
    agent.store.append_messages(
        agent.record.id,
        [Message("user", "I flew to Lyon for my sister's wedding", clock() - timedelta(days=30), in_context=False)],
    )
    await agent.send("Hi, I am Lin")
    clock.advance(minutes=1)
    await agent.send("I live in Porto")
    for text, tags in [
        ("Lin is allergic to peanuts", ["health"]),
        ("Lin's favourite colour is blue", ["preferences"]),
        ("Lin's favourite colour is green", ["preferences"]),
        ("Lin lives in Porto", ["places"]),
    ]:
        await agent.archival.insert(text, tags=tags)
    with agent.store.engine.begin() as conn:
        conn.exec_driver_sql("UPDATE agents SET summary = 'Lin said hello before.' WHERE name = 'keeper'")
    return agent


async def reloaded(url, clock, name="keeper", model=None) -> Agent:
    store = StateStore(make_engine(url))
    spec = build_spec(name, tools=TOOLS)
    return await Agent.load(spec, model=model, store=store, clock=clock)


def prompt_bytes(agent: Agent) -> bytes:
    compiled = agent.compile()
    return json.dumps({"messages": compiled.messages, "tools": compiled.tools}, ensure_ascii=False).encode()


async def searches(agent: Agent) -> list[list[tuple[str, tuple[str, ...], float]]]:
    found = []
    for query in QUERIES:
        hits = await agent.archival.search(query, top_k=3, count_hits=False)
        found.append([(h.text, tuple(h.tags), round(h.score, 6)) for h in hits])
    return found


def roundtrip(source_url, target_url, name=None, **kwargs):
    text = "".join(export_lines(StateStore(make_engine(source_url)), "keeper"))
    bundle = parse(text.splitlines(keepends=True))
    return text, import_bundle(StateStore(make_engine(target_url)), Settings.from_env(), bundle, name=name, **kwargs)


async def test_round_trip_same_prompt_and_searches(scripted_openai, clock, database_url, tmp_path):
    agent = await lived_in(database_url, scripted_openai, clock)
    before_prompt, before_search = prompt_bytes(await reloaded(database_url, clock)), await searches(agent)
    other = f"sqlite:///{tmp_path / 'other.db'}" if database_url.startswith("postgres") else database_url
    if other == database_url:  # SQLite: a second database file beside it
        other = f"sqlite:///{tmp_path / 'second.db'}"
    text, report = roundtrip(database_url, other)
    assert report.counts["message"] == len(agent.store.all_messages(agent.record.id)) and report.reembedded == 4
    first = json.loads(text.splitlines()[0])
    assert first["format"] == FORMAT and first["version"] == VERSION
    assert {json.loads(line)["type"] for line in text.splitlines()[1:]} >= {
        "agent",
        "block",
        "block_version",
        "step",
        "message",
        "archival_memory",
        "archival_version",
        "end",
    }
    copy = await reloaded(other, clock)
    assert prompt_bytes(copy) == before_prompt
    assert await searches(copy) == before_search
    assert [m.in_context for m in copy.store.all_messages(copy.record.id)][0] is False  # recall only, still


async def test_cross_backend_postgres_to_sqlite_and_back(scripted_openai, clock, database_url, tmp_path):
    if not database_url.startswith("postgres"):
        pytest.skip("the Postgres run exports to SQLite and back")
    agent = await lived_in(database_url, scripted_openai, clock)
    expected_prompt, expected_search = prompt_bytes(await reloaded(database_url, clock)), await searches(agent)
    lite = f"sqlite:///{tmp_path / 'lite.db'}"
    roundtrip(database_url, lite)
    assert prompt_bytes(await reloaded(lite, clock)) == expected_prompt
    text = "".join(export_lines(StateStore(make_engine(lite)), "keeper"))
    bundle = parse(text.splitlines(keepends=True))
    report = import_bundle(StateStore(make_engine(database_url)), Settings.from_env(), bundle, replace=True)
    assert report.replaced and report.agent_id != agent.record.id
    back = await reloaded(database_url, clock)
    assert prompt_bytes(back) == expected_prompt
    assert await searches(back) == expected_search


async def test_name_taken_as_and_replace(scripted_openai, clock, database_url):
    agent = await lived_in(database_url, scripted_openai, clock)
    expected = prompt_bytes(await reloaded(database_url, clock))
    bundle = read_bundle(agent.store.engine, "keeper")
    store = StateStore(make_engine(database_url))
    with pytest.raises(NameTaken):
        import_bundle(store, Settings.from_env(), bundle)
    twin = import_bundle(store, Settings.from_env(), bundle, name="twin")
    assert twin.agent_id != agent.record.id
    assert await searches(await reloaded(database_url, clock, name="twin")) == await searches(agent)
    replaced = import_bundle(store, Settings.from_env(), read_bundle(store.engine, "twin"), name="keeper", replace=True)
    assert replaced.replaced and replaced.agent_id not in (agent.record.id, twin.agent_id)
    assert [a.name for a in store.list_agents()] == ["keeper", "twin"]
    assert prompt_bytes(await reloaded(database_url, clock)) == expected


def test_format_refuses_what_it_cannot_read(sqlite_url):
    with pytest.raises(FormatError, match="not a pagemind.agent file"):
        parse(['{"format": "other", "version": 1}\n'])
    with pytest.raises(FormatError, match="version 2"):
        parse([json.dumps({"format": FORMAT, "version": 2}) + "\n"])
    header = json.dumps({"format": FORMAT, "version": 1}) + "\n"
    agent = json.dumps({"type": "agent", "name": "x", "spec": {}}) + "\n"
    with pytest.raises(FormatError, match="cut short"):
        parse([header, agent])
    with pytest.raises(FormatError, match="unknown record type"):
        parse([header, agent, '{"type": "mystery"}\n'])


def test_code_in_a_spec_is_refused_unless_allowed(sqlite_url):
    store = StateStore(make_engine(sqlite_url))
    spec = build_spec("coder").model_dump(mode="json")
    spec["tools"] = ["send_message", "os:system"]
    header = json.dumps({"format": FORMAT, "version": 1}) + "\n"
    agent = json.dumps({"type": "agent", "name": "coder", "spec": spec}) + "\n"
    lines = [header, agent, '{"type":"end","records":1}\n']
    with pytest.raises(ImportRefused, match="allow-code"):
        import_bundle(store, Settings.from_env(), parse(lines))
    assert store.get_agent("coder") is None


def test_a_schema_pagemind_ships_is_allowed_by_default_but_not_for_a_client(sqlite_url):
    store = StateStore(make_engine(sqlite_url))
    spec = build_spec("profiled").model_dump(mode="json", by_alias=True)
    spec["blocks"][1]["schema"] = "pagemind.blocks.profiles:CompanionProfile"
    spec["blocks"][1]["value"] = ""
    header = json.dumps({"format": FORMAT, "version": 1}) + "\n"
    agent = json.dumps({"type": "agent", "name": "profiled", "spec": spec}) + "\n"
    bundle = parse([header, agent, '{"type":"end","records":1}\n'])
    with pytest.raises(ImportRefused, match="names code"):
        import_bundle(store, Settings.from_env(), bundle, code="none")
    assert import_bundle(store, Settings.from_env(), bundle).name == "profiled"


def normalized(bundle) -> dict:
    """A bundle with the ids only one database means (messages', steps') replaced by their order."""
    messages = {r["id"]: i for i, r in enumerate(bundle.of("message"))}
    steps = {r["id"]: i for i, r in enumerate(bundle.of("step"))}

    def fix(kind: str, record: dict) -> dict:
        record = dict(record)
        if kind in ("message", "step"):
            record["id"] = (messages if kind == "message" else steps)[record["id"]]
        if record.get("step_id") is not None:
            record["step_id"] = steps[record["step_id"]]
        for key in ("first_message_id", "last_message_id"):
            if record.get(key) is not None:
                record[key] = messages[record[key]]
        if kind == "archival_memory":
            record["source_message_ids"] = [messages[i] for i in record["source_message_ids"]]
        return record

    rows = {kind: [fix(kind, r) for r in records] for kind, records in bundle.rows.items() if kind != "origin"}
    return {"agent": bundle.agent, "rows": rows}


async def test_every_record_survives_the_round_trip(scripted_openai, clock, database_url, tmp_path):
    agent = await lived_in(database_url, scripted_openai, clock)
    messages = agent.store.all_messages(agent.record.id)
    episode = MemoryRecord(
        agent_id=agent.record.id,
        text="Lin introduced herself and said she lives in Porto.",
        kind="episode",
        created_at=messages[1].created_at,
        updated_at=clock(),
        source_message_ids=[m.id for m in messages[1:4]],
    )
    await agent.archival.insert_event(episode, {"messages": 3})
    with agent.store.engine.begin() as conn:
        conn.execute(
            insert(table_of(SummaryRow)),
            {
                "agent_id": agent.record.id,
                "text": "Lin said hello before.",
                "evicted_count": 2,
                "first_message_id": messages[1].id,
                "last_message_id": messages[2].id,
                "tokens_before": 900,
                "tokens_after": 300,
                "created_at": clock(),
            },
        )
        conn.execute(
            insert(trigger_fires), {"agent_id": agent.record.id, "trigger_key": "idle:2h", "fired_at": clock()}
        )
        conn.execute(
            insert(reflections),
            {
                "id": "0f0e0d0c-0000-4000-8000-000000000001",
                "agent_id": agent.record.id,
                "started_at": clock(),
                "finished_at": clock(),
                "last_message_id": messages[-1].id,
                "status": "done",
                "counts": {"merged": 1},
                "plan": None,
                "error": None,
            },
        )
    first = read_bundle(agent.store.engine, "keeper")
    assert all(first.of(kind) for kind in ("summary", "trigger_fire", "reflection", "block_version", "step"))
    assert any(r["kind"] == "episode" for r in first.of("archival_memory"))
    other = f"sqlite:///{tmp_path / 'other.db'}"
    text = "".join(export_lines(agent.store, "keeper"))
    import_bundle(StateStore(make_engine(other)), Settings.from_env(), parse(text.splitlines()))
    second = read_bundle(make_engine(other), "keeper")
    assert normalized(second) == normalized(first)
    assert second.of("origin")[0]["template"] is None  # served by a daemon as an agent of its stored spec


def test_an_mcp_server_in_an_imported_spec_is_refused_unless_allowed(sqlite_url, tmp_path):
    """An MCP server runs a command (or calls a URL) when its agent loads: a file from elsewhere may not name one."""
    store = StateStore(make_engine(sqlite_url))
    spec = build_spec("bridged").model_dump(mode="json")
    marker = tmp_path / "started"
    spec["tools"] = ["send_message", {"mcp": {"command": "touch", "args": [str(marker)]}}]
    header = json.dumps({"format": FORMAT, "version": 1}) + "\n"
    agent = json.dumps({"type": "agent", "name": "bridged", "spec": spec}) + "\n"
    bundle = parse([header, agent, '{"type":"end","records":1}\n'])
    with pytest.raises(ImportRefused, match="allow-code"):
        import_bundle(store, Settings.from_env(), bundle)
    assert store.get_agent("bridged") is None and not marker.exists()
    assert import_bundle(store, Settings.from_env(), bundle, code="any").name == "bridged"
