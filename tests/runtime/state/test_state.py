import pytest

from pagemind.runtime.agent import Agent
from pagemind.runtime.spec.agent import AgentSpec
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.responses import tool_call_body as tool_call
from pagemind.runtime.testing.specs import spec_data


def spec_with(**changes) -> AgentSpec:
    return AgentSpec.model_validate(spec_data(**changes))


async def test_changed_yaml_updates_spec_fields_but_keeps_edited_memory(scripted_openai, make_agent, database_url):
    scripted_openai.add(
        tool_call("core_memory_replace", {"label": "persona", "old_content": "careful", "new_content": "bold"}),
        tool_call("send_message", {"message": "ok"}),
    )
    agent = await make_agent(database_url, scripted_openai.client())
    await agent.send("be bold")
    first_hash = agent.record.spec_hash

    blocks = spec_data()["blocks"]
    blocks[0]["value"] = "A brand new persona from YAML."
    blocks[0]["limit"] = 300
    blocks.append({"label": "plan", "value": "seeded plan", "limit": 50})
    store = StateStore(make_engine(database_url))
    reloaded = await Agent.load(spec_with(blocks=blocks, system="changed"), store=store)
    assert reloaded.record.spec_hash != first_hash
    persona = reloaded.memory.get("persona")
    assert (persona.value, persona.limit) == ("I am a bold tester.", 300)  # stored value wins, limit follows YAML
    assert reloaded.memory.get("plan").value == "seeded plan"  # a new block is seeded
    assert len(reloaded.window.messages) == 5

    reset = await Agent.load(spec_with(blocks=blocks), store=store, reset_memory=True)
    assert reset.memory.get("persona").value == "A brand new persona from YAML."
    history = store.block_history(reset.record.id, "persona")
    assert [v.operation for v in history] == ["replace", "reset"]
    assert [a.name for a in store.list_agents()] == ["tester"]


async def test_agents_are_known_by_name(make_agent, database_url):
    await make_agent(database_url, None)
    store = StateStore(make_engine(database_url))
    assert store.get_agent("tester") is not None and store.get_agent("nobody") is None
    assert AgentSpec.model_validate_json(store.stored_spec_json("tester")).name == "tester"


def test_a_database_from_before_a_new_column_is_upgraded_in_place(tmp_path):
    import sqlalchemy

    url = f"sqlite:///{tmp_path / 'old.db'}"
    engine = sqlalchemy.create_engine(url)
    with engine.begin() as conn:  # the agents table as the first release created it
        conn.execute(
            sqlalchemy.text(
                "CREATE TABLE agents (id INTEGER PRIMARY KEY, name VARCHAR UNIQUE, spec_hash VARCHAR, spec_json TEXT, "
                "summary TEXT NOT NULL DEFAULT '', created_at DATETIME, updated_at DATETIME)"
            )
        )
        conn.execute(
            sqlalchemy.text("INSERT INTO agents VALUES (1, 'old', 'h', '{}', 'kept', '2026-01-01', '2026-01-01')")
        )
    store = StateStore(make_engine(url))
    record = store.get_agent("old")
    assert (record.summary, record.pressure_warned, record.token_correction) == ("kept", False, 1.0)


async def test_renaming_an_agent_keeps_its_identity_and_everything_keyed_by_it(make_agent, database_url, tmp_path):
    from pagemind.runtime.memory.archival.memory import ArchivalService
    from pagemind.runtime.memory.vectors.edge import EdgeBackend
    from pagemind.runtime.state.store import AgentNameTaken
    from pagemind.runtime.testing.embedder import FakeEmbedder

    agent = await make_agent(database_url, None)
    store = agent.store
    backend = EdgeBackend(tmp_path / "qdrant", FakeEmbedder.dim)

    def archival(agent_id: int) -> ArchivalService:
        return ArchivalService(agent_id, engine=store.engine, open_backend=lambda: backend, embedder=FakeEmbedder())

    try:
        saved = await archival(agent.record.id).insert("Lin's sister Mei lives in Lyon")
        store.ensure_agent(spec_with(name="other"))

        renamed = store.rename_agent("tester", "keeper")
        assert renamed.id == agent.record.id and store.get_agent("tester") is None
        with pytest.raises(AgentNameTaken):
            store.rename_agent("keeper", "other")  # nothing is merged
        with pytest.raises(KeyError):
            store.rename_agent("nobody", "somebody")

        reloaded = await Agent.load(spec_with(name="keeper"), store=store)  # the YAML now says `name: keeper`
        assert reloaded.record.id == agent.record.id
        assert reloaded.memory.get("persona").value == "I am a careful tester."
        assert [m.id for m in archival(reloaded.record.id).list()] == [saved.id]
        assert [h.id for h in await archival(reloaded.record.id).search("Lin's sister Mei lives in Lyon")] == [saved.id]
    finally:
        backend.close()
