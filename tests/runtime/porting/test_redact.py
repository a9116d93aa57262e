"""`pagemind export --redact` (issue 35, item 5): a phone number, a card, an e-mail address and a street address
written in messages, tool-call arguments, a block and its history, an archival memory, a summary, a pending review
and a muted topic are in no byte of the redacted file, whose placeholders are numbered across the whole file; the
file imports like any other, in either format, and through the API."""

from __future__ import annotations

import json
import re

from sqlalchemy import insert

from pagemind.runtime.agent import Agent
from pagemind.runtime.memory.review import ReviewQueue
from pagemind.runtime.memory.topics import MutedTopics
from pagemind.runtime.porting.files import export_lines, import_file, read_file
from pagemind.runtime.porting.records import Bundle
from pagemind.runtime.porting.redaction import redact_bundle
from pagemind.runtime.process.settings import Settings
from pagemind.runtime.spec.review import ReviewConfig
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.state.tables.conversation import SummaryRow
from pagemind.runtime.state.tables.schema import table_of
from pagemind.runtime.testing.responses import tool_call_body as tool_call
from pagemind.runtime.testing.specs import build_spec

TOOLS = ["send_message", "core_memory_append", "archival_memory_insert", "archival_search"]
PHONE, PHONE_SPACED = "13800138000", "+86 138 0013 8000"  # one number, two spellings: one placeholder
CARD, CARD_BARE = "4111 1111 1111 1111", "4111111111111111"  # Luhn-valid
EMAIL = "lin.canary@example.org"
ADDRESS = "221 Baker Street"
CANARIES = [PHONE, "138 0013 8000", CARD, CARD_BARE, EMAIL, ADDRESS]


async def told_everything(url: str, scripted_openai, clock) -> Agent:
    """An agent (not redacting) told the canaries: in a message, a block edit (tool-call arguments, the block and
    its history), a reply, an archival memory, a summary, the window's summary, a pending review, a muted topic."""
    scripted_openai.add(
        tool_call("core_memory_append", {"label": "human", "content": f"Phone: {PHONE}. Card {CARD}."}),
        tool_call("send_message", {"message": f"Noted, I will write to {EMAIL}."}),
    )
    store = StateStore(make_engine(url))
    spec = build_spec("keeper", tools=TOOLS)
    agent = await Agent.load(spec, model=scripted_openai.client(), store=store, clock=clock)
    await agent.send(f"Call me on {PHONE_SPACED}, mail {EMAIL}, I live at {ADDRESS}")
    await agent.archival.insert(f"Lin's card is {CARD_BARE}, phone {PHONE}", tags=["pay"])
    messages = store.all_messages(agent.record.id)
    with store.engine.begin() as conn:
        conn.execute(
            insert(table_of(SummaryRow)),
            {
                "agent_id": agent.record.id,
                "text": f"Lin gave {EMAIL} and {PHONE_SPACED}.",
                "evicted_count": 2,
                "first_message_id": messages[0].id,
                "last_message_id": messages[1].id,
                "tokens_before": 900,
                "tokens_after": 300,
                "created_at": clock(),
            },
        )
        conn.exec_driver_sql(f"UPDATE agents SET summary = 'Lin lives at {ADDRESS}.' WHERE name = 'keeper'")
    queue = ReviewQueue(agent.record.id, store.engine, None, ReviewConfig(), clock=clock)
    await queue.hold("extraction", f"Lin's e-mail is {EMAIL}", kind="fact", source_message_ids=[messages[0].id])
    MutedTopics(agent.record.id, store.engine, None, clock=clock).mute(f"the flat at {ADDRESS}")
    return agent


async def test_a_redacted_export_holds_no_canary_and_imports(scripted_openai, clock, database_url, tmp_path):
    agent = await told_everything(database_url, scripted_openai, clock)
    plain = "".join(export_lines(agent.store, "keeper"))
    assert all(c in plain for c in (PHONE, CARD, EMAIL, ADDRESS))  # the canaries are there to be redacted
    text = "".join(export_lines(agent.store, "keeper", redact=True))
    raw = text.encode("utf-8")
    assert [c for c in CANARIES if c.encode() in raw] == []
    assert json.loads(text.splitlines()[0])["redacted"] is True
    assert "redacted" not in json.loads(plain.splitlines()[0])
    # One number for one value wherever it stands, two spellings of the phone included, and nothing else numbered.
    assert set(re.findall(r"\[(?:phone|card|email|address)#\d+\]", text)) == {
        "[phone#1]",
        "[card#1]",
        "[email#1]",
        "[address#1]",
    }
    records = [json.loads(line) for line in text.splitlines()[1:]]
    by_type = {r["type"]: r for r in records}
    human = next(r for r in records if r["type"] == "block" and r["label"] == "human")
    assert "Phone: [phone#1]. Card [card#1]." in human["value"]
    assert any("[phone#1]" in (r["new_value"] or "") for r in records if r["type"] == "block_version")
    assert "[phone#1]" in by_type["archival_memory"]["text"] and "[card#1]" in by_type["archival_memory"]["text"]
    assert by_type["summary"]["text"] == "Lin gave [email#1] and [phone#1]."
    assert by_type["agent"]["summary"] == "Lin lives at [address#1]."
    assert by_type["memory_review"]["text"] == "Lin's e-mail is [email#1]"
    assert by_type["muted_topic"]["topic"] == "the flat at [address#1]"
    calls = [c for r in records if r["type"] == "message" for c in r.get("tool_calls") or []]
    assert any("[phone#1]" in c["arguments"] for c in calls) and {c["name"] for c in calls} >= {"core_memory_append"}
    assert not any(t.startswith("pii_") for t in by_type)
    # Structure is kept: the same records, ids, roles and labels as the plain export.
    plain_records = [json.loads(line) for line in plain.splitlines()[1:]]
    assert [(r["type"], r.get("id"), r.get("role"), r.get("label")) for r in records] == [
        (r["type"], r.get("id"), r.get("role"), r.get("label")) for r in plain_records
    ]

    other = StateStore(make_engine(database_url))  # the same database (and vector store): a new agent beside it
    [report] = import_file(other, Settings.from_env(), raw, name="keeper-redacted")
    assert report.counts["message"] == len(agent.store.all_messages(agent.record.id))
    copy = await Agent.load(build_spec("keeper-redacted", tools=TOOLS), store=other, clock=clock)
    assert "[phone#1]" in copy.compile().messages[0]["content"]
    hits = await copy.archival.search("card phone", top_k=1, count_hits=False)
    assert hits[0].text == "Lin's card is [card#1], phone [phone#1]"


async def test_a_redacted_letta_file_and_placeholders_already_there(scripted_openai, clock, sqlite_url, tmp_path):
    agent = await told_everything(sqlite_url, scripted_openai, clock)
    with agent.store.engine.begin() as conn:  # a placeholder of the agent's own (pii: redact once): kept, not reused
        conn.exec_driver_sql("UPDATE blocks SET value = value || ' Old: [phone#1].' WHERE label = 'persona'")
    text = "".join(export_lines(agent.store, "keeper", "af", redact=True))
    assert [c for c in CANARIES if c in text] == []
    document = json.loads(text)
    assert document["metadata"]["redacted"] is True
    persona = next(b for b in document["blocks"] if b["label"] == "persona")
    human = next(b for b in document["blocks"] if b["label"] == "human")
    assert persona["value"].endswith("Old: [phone#1].") and "Phone: [phone#2]." in human["value"]
    assert read_file(text.encode()).format == "af"
    other = StateStore(make_engine(f"sqlite:///{tmp_path / 'other.db'}"))
    [report] = import_file(other, Settings.from_env(), text.encode(), name="from-af")
    assert report.counts["message"] >= 4


def test_json_values_keep_their_structure_and_the_agents_numbering_stays_out():
    ids = "13800138000"  # an id that a recogniser would take for a phone number: under a structure key, kept
    bundle = Bundle(
        agent={"name": "x", "summary": "", "spec": {"blocks": [{"label": "human", "value": f"Tel {PHONE}"}]}},
        rows={
            "reflection": [
                {"id": ids, "plan": {"merges": [{"keep": ids, "drop": [ids], "reason": f"both say {PHONE}"}]}}
            ],
            "archival_version": [{"memory_id": ids, "text": f"mail {EMAIL}", "detail": {"by": ids, "old": EMAIL}}],
            "origin": [{"template": None, "blocks": {"human": f"Tel {PHONE}"}}],
            "pii_key": [{"key": "c2VjcmV0"}],
            "pii_placeholder": [{"kind": "phone", "number": 1, "digest": "ab"}],
        },
    )
    redacted = redact_bundle(bundle)
    assert redacted.agent["spec"]["blocks"][0]["value"] == "Tel [phone#1]"
    assert redacted.of("reflection")[0] == {
        "id": ids,
        "plan": {"merges": [{"keep": ids, "drop": [ids], "reason": "both say [phone#1]"}]},
    }
    assert redacted.of("archival_version")[0] == {
        "memory_id": ids,
        "text": "mail [email#1]",
        "detail": {"by": ids, "old": "[email#1]"},
    }
    assert redacted.of("origin")[0]["blocks"] == {"human": "Tel [phone#1]"}
    assert not redacted.of("pii_key") and not redacted.of("pii_placeholder")
    assert bundle.of("archival_version")[0]["text"] == f"mail {EMAIL}"  # the bundle read is left as it was
