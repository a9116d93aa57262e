"""Making agents through the daemon (issue 12, thousands of agents): a new agent's rows, its blocks and its origin
are written in one commit (`runtime.state.new_agent`), and they are the rows `StateStore.ensure_agent` would have
written; a taken name still goes the careful way."""

from __future__ import annotations

import pytest

from pagemind.runtime.spec.agent import AgentSpec
from pagemind.runtime.spec.loading import load_spec
from pagemind.runtime.state.records import utcnow
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.specs import spec_data
from pagemind.scheduler.catalog import AgentCatalog
from pagemind.scheduler.errors import AgentExists
from tests.support.daemon_support import TEMPLATE, write_agents


def test_an_agent_made_from_a_template_has_the_rows_ensure_agent_would_write(database_url, tmp_path):
    store = StateStore.open(database_url)
    catalog = AgentCatalog(write_agents(tmp_path / "agents"), store)
    info = catalog.create("u1", utcnow(), template=TEMPLATE, blocks={"human": "Name: Lin."})
    reference = catalog.spec_for("u1")
    seeded = AgentSpec.model_validate(
        {
            **reference.model_dump(),
            "blocks": [
                {**b.model_dump(), "value": "Name: Lin." if b.label == "human" else b.value} for b in reference.blocks
            ],
        }
    )
    other = seeded.model_copy(update={"name": "u2"})
    made = store.ensure_agent(other)  # the ORM path, for comparison
    fast, slow = store.get_agent("u1"), store.agent_record(made.id)
    assert info.template == TEMPLATE and info.created_at.tzinfo is not None
    assert (fast.spec_hash, slow.spec_hash) == (seeded.spec_hash(), other.spec_hash())
    assert fast.summary == slow.summary == ""
    assert (fast.pressure_warned, fast.token_correction) == (slow.pressure_warned, slow.token_correction)
    assert AgentSpec.model_validate_json(store.stored_spec_json("u1")) == seeded
    blocks, versions = store.load_core(fast.id, seeded)
    reference_blocks, reference_versions = store.load_core(made.id, seeded)
    assert [(b.label, b.value, b.limit) for b in blocks] == [(b.label, b.value, b.limit) for b in reference_blocks]
    assert dict(versions) == dict(reference_versions)
    assert catalog.agent_id("u1") == fast.id and catalog.spec_for("u1").name == "u1"


def test_a_taken_name_is_refused_unless_it_is_a_half_made_agent_of_the_same_spec(database_url, tmp_path):
    store = StateStore.open(database_url)
    folder = write_agents(tmp_path / "agents")
    catalog = AgentCatalog(folder, store)
    store.ensure_agent(AgentSpec.model_validate(spec_data("cli-made")))  # `pagemind run` made it: not ours
    with pytest.raises(AgentExists):
        catalog.create("cli-made", utcnow(), template=TEMPLATE)
    half = load_spec(folder / f"{TEMPLATE}.yaml").model_copy(update={"name": "half", "template": False})
    agent_id = store.ensure_agent(half).id  # an older daemon died between the agent and its origin
    assert catalog.create("half", utcnow(), template=TEMPLATE).template == TEMPLATE
    assert catalog.agent_id("half") == agent_id
    with pytest.raises(AgentExists):
        catalog.create("half", utcnow(), template=TEMPLATE)
