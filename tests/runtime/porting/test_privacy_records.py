"""The records issue 35 added to the export: muted topics and pending reviews travel with their agent (links to
messages and memories rewritten); a redacting agent's placeholder numbering survives the round trip, so
`[phone#1]` means the same number after it; kept originals travel only under `keep_originals`, and only into a
store that seals them."""

from __future__ import annotations

import json

import pytest

from pagemind.runtime.agent import Agent
from pagemind.runtime.crypto.keys import Encryption, new_key_text, parse_key
from pagemind.runtime.memory.review import ReviewQueue
from pagemind.runtime.memory.topics import MutedTopics
from pagemind.runtime.porting.files import export_lines, import_file
from pagemind.runtime.porting.load import ImportRefused
from pagemind.runtime.privacy.policy import AgentPrivacy
from pagemind.runtime.process.settings import Settings
from pagemind.runtime.spec.privacy import PrivacyConfig
from pagemind.runtime.spec.review import ReviewConfig
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.models import FunctionModel
from pagemind.runtime.testing.responses import reply_body
from pagemind.runtime.testing.responses import tool_call_body as tool_call
from pagemind.runtime.testing.specs import build_spec

PHONE, OTHER_PHONE = "13912345678", "13700001111"
REDACTING = {"pii": "redact"}
TOOLS = ["send_message", "archival_memory_insert", "archival_search"]


def types_in(text: str) -> list[str]:
    return [json.loads(line).get("type") for line in text.splitlines()[1:]]


async def test_muted_topics_and_pending_reviews_round_trip(scripted_openai, clock, database_url):
    scripted_openai.add(tool_call("send_message", {"message": "Hello Lin!"}))
    store = StateStore(make_engine(database_url))
    spec = build_spec("keeper", tools=TOOLS)
    agent = await Agent.load(spec, model=scripted_openai.client(), store=store, clock=clock)
    await agent.send("Hi, I am Lin and I love hiking")
    memory = await agent.archival.insert("Lin's todo: buy boots", tags=["todo"])
    messages = store.all_messages(agent.record.id)
    mutes = MutedTopics(agent.record.id, store.engine, None, clock=clock)
    mutes.mute("my ex Mark")
    clock.advance(minutes=1)
    mutes.mute("别再提他了")
    queue = ReviewQueue(agent.record.id, store.engine, None, ReviewConfig(), clock=clock)
    await queue.hold("extraction", "Lin loves hiking", tags=["hobby"], source_message_ids=[messages[0].id])
    clock.advance(minutes=1)
    await queue.hold("reflection", "Lin bought boots", kind="fact", supersedes=memory.id)
    text = "".join(export_lines(store, "keeper"))
    assert types_in(text).count("muted_topic") == 2 and types_in(text).count("memory_review") == 2

    # Imported twice beside the original: its review ids are taken, so each copy's are derived anew, links with them.
    for name in ("twin", "triplet"):
        [report] = import_file(store, Settings.from_env(), text.encode(), name=name)
        assert report.counts["muted_topic"] == 2 and report.counts["memory_review"] == 2
        copy = store.get_agent(name)
        assert MutedTopics(copy.id, store.engine, None).topics() == ["my ex Mark", "别再提他了"]
        pending = ReviewQueue(copy.id, store.engine, None, ReviewConfig()).pending()
        original = queue.pending()
        assert [(p.origin, p.text, p.kind, p.tags, p.created_at) for p in pending] == [  # the same, in order
            (p.origin, p.text, p.kind, p.tags, p.created_at) for p in original
        ]
        copied_memory = {m.text: m.id for m in (await _archival(copy.name, store, clock)).list()}
        assert pending[1].supersedes == copied_memory["Lin's todo: buy boots"]
    ids = {
        name: [p.id for p in ReviewQueue(store.get_agent(name).id, store.engine, None, ReviewConfig()).pending()]
        for name in ("keeper", "twin", "triplet")
    }
    assert len({i for found in ids.values() for i in found}) == 6


async def _archival(name: str, store: StateStore, clock):
    agent = await Agent.load(build_spec(name, tools=TOOLS), store=store, clock=clock)
    return agent.archival


def _model() -> FunctionModel:
    return FunctionModel(lambda request: reply_body("Noted."))


async def test_a_redacting_agents_numbering_survives_the_round_trip(database_url, tmp_path):
    store = StateStore(make_engine(database_url))
    spec = build_spec("keeper", privacy=REDACTING)
    agent = await Agent.load(spec, model=_model(), store=store)
    await agent.send(f"My number is {PHONE}")
    assert "[phone#1]" in str(store.all_messages(agent.record.id)[0].content)
    text = "".join(export_lines(store, "keeper"))
    assert {"pii_key", "pii_placeholder"} <= set(types_in(text)) and "pii_original" not in types_in(text)
    assert PHONE not in text  # the numbering is keyed hashes, never the value

    other = StateStore(make_engine(f"sqlite:///{tmp_path / 'other.db'}"))
    import_file(other, Settings.from_env(), text.encode())
    copy = other.get_agent("keeper")
    privacy = AgentPrivacy.of(PrivacyConfig(**REDACTING), other.engine, copy.id)
    assert await privacy.text(f"call {PHONE} or {OTHER_PHONE}") == "call [phone#1] or [phone#2]"

    keeping = build_spec("plain")  # pii: keep: an agent's stale numbering is no part of its export
    plain = await Agent.load(keeping, model=_model(), store=store)
    await AgentPrivacy.of(PrivacyConfig(**REDACTING), store.engine, plain.record.id).text(f"call {PHONE}")
    assert not {t for t in types_in("".join(export_lines(store, "plain"))) if t.startswith("pii_")}


async def test_kept_originals_travel_sealed_and_only_into_a_sealing_store(tmp_path):
    key = Encryption(parse_key(new_key_text(), "test"))
    url = f"sqlite:///{tmp_path / 'sealed.db'}"
    store = StateStore.open(url, key)
    spec = build_spec("keeper", privacy={"pii": "redact", "keep_originals": True})
    agent = await Agent.load(spec, model=_model(), store=store)
    await agent.send(f"My number is {PHONE}")
    store.engine.dispose()
    assert PHONE.encode() not in (tmp_path / "sealed.db").read_bytes()

    text = "".join(export_lines(StateStore.open(url, key), "keeper"))  # the key opens the sealed columns
    originals = [json.loads(line) for line in text.splitlines() if '"pii_original"' in line]
    assert [(o["kind"], o["number"], o["value"]) for o in originals] == [("phone", 1, PHONE)]

    bare = StateStore(make_engine(f"sqlite:///{tmp_path / 'bare.db'}"))
    with pytest.raises(ImportRefused, match="PAGEMIND_ENCRYPTION_KEY"):
        import_file(bare, Settings.from_env(), text.encode())
    assert bare.get_agent("keeper") is None

    other_key = Encryption(parse_key(new_key_text(), "test"))
    target = StateStore.open(f"sqlite:///{tmp_path / 'target.db'}", other_key)
    import_file(target, Settings.from_env(), text.encode())
    copy = target.get_agent("keeper")
    privacy = AgentPrivacy.of(PrivacyConfig(pii="redact", keep_originals=True), target.engine, copy.id)
    assert await privacy.filled("I'll call [phone#1].") == f"I'll call {PHONE}."
    target.engine.dispose()
    assert PHONE.encode() not in (tmp_path / "target.db").read_bytes()
