"""Placeholders and their numbering per agent, the `privacy:` policy per kind, and model answers redacted whole."""

from __future__ import annotations

import json

import pytest
import sqlalchemy

from pagemind.runtime.model.response import ModelResponse
from pagemind.runtime.privacy.book import PlaceholderBook
from pagemind.runtime.privacy.policy import AgentPrivacy
from pagemind.runtime.privacy.redactor import redact
from pagemind.runtime.spec.loading import SpecError, load_spec
from pagemind.runtime.spec.privacy import PrivacyConfig
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.specs import build_spec
from pagemind.tools import ToolCall, ToolResult

ALL = ("phone", "email", "card", "cn_id", "passport", "iban", "ip", "address")


def test_the_same_value_gets_its_number_again_and_a_new_one_the_next():
    book = PlaceholderBook(b"k" * 32)
    first = redact("call 13800138000 or mail a@example.com", ALL, book)
    assert first.text == "call [phone#1] or mail [email#1]"
    again = redact("手机 +86 138 0013 8000，另一个 13912345678，邮箱 A@Example.com", ALL, book)
    assert again.text == "手机 [phone#1]，另一个 [phone#2]，邮箱 [email#1]"  # one number however it is written
    assert [(e.kind, e.number) for e in again.new] == [("phone", 2)]
    assert redact(again.text, ALL, book).text == again.text  # placeholders are never matched again


def test_the_book_keeps_keyed_hashes_only():
    one, other = PlaceholderBook(b"a" * 32), PlaceholderBook(b"b" * 32)
    redact("13800138000", ALL, one)
    redact("13800138000", ALL, other)
    [kept] = one.numbers.values()
    assert "13800138000" not in repr(one.numbers) and len(kept.digest) == 40
    assert kept.digest != next(iter(other.numbers.values())).digest  # a different agent key, a different hash


def test_policy_per_kind_and_its_defaults():
    assert PrivacyConfig().redacted_kinds() == ()  # keep: as before the setting existed
    assert PrivacyConfig(pii="redact").redacted_kinds() == ALL[:-1]  # every kind but the address heuristic
    chosen = PrivacyConfig(pii="redact", kinds={"address": "redact", "ip": "keep"}).redacted_kinds()
    assert "address" in chosen and "ip" not in chosen
    assert PrivacyConfig(pii="keep", kinds={"phone": "redact"}).redacted_kinds() == ()


def test_an_unknown_kind_is_a_clear_error(tmp_path):
    path = tmp_path / "a.yaml"
    path.write_text("name: a\nmodel: {name: m}\nsystem: hi\nprivacy: {pii: redact, kinds: {fax: keep}}\n")
    with pytest.raises(SpecError, match="privacy.kinds"):
        load_spec(path)


def test_an_agent_without_the_section_keeps_its_spec_hash():
    plain = build_spec()
    assert plain.privacy == PrivacyConfig()
    assert "privacy" not in plain.fingerprint()  # stored agents are not seen as changed
    assert "privacy" in build_spec(privacy={"pii": "redact"}).fingerprint()


async def test_a_model_answer_is_redacted_in_its_text_arguments_and_raw_body(sqlite_url):
    store = StateStore(make_engine(sqlite_url))
    record = store.ensure_agent(build_spec())
    privacy = AgentPrivacy.of(PrivacyConfig(pii="redact"), store.engine, record.id)
    arguments = json.dumps({"content": "her card is 4111 1111 1111 1111, 电话13800138000"})  # \\u escapes
    raw = {
        "id": "chatcmpl-1",
        "choices": [
            {
                "message": {
                    "role": "assistant",
                    "content": "mail lin@example.com",
                    "tool_calls": [{"id": "c1", "function": {"name": "note", "arguments": arguments}}],
                }
            }
        ],
    }
    response = ModelResponse("mail lin@example.com", (ToolCall("c1", "note", arguments),), raw=raw)
    redacted = await privacy.response(response)
    assert redacted.content == "mail [email#1]"
    assert json.loads(redacted.tool_calls[0].arguments) == {"content": "her card is [card#1], 电话[phone#1]"}
    body = json.dumps(redacted.raw, ensure_ascii=False)
    assert "4111" not in body and "13800138000" not in body and "lin@example.com" not in body
    assert redacted.raw["id"] == "chatcmpl-1"
    [result] = await privacy.results([ToolResult("c1", "note", "saved 13800138000", False)])
    assert result.content == "saved [phone#1]"


async def test_two_processes_numbering_one_agent_agree(sqlite_url):
    """Each has its own book; the database's constraints make the second read again rather than reuse a number."""
    store = StateStore(make_engine(sqlite_url))
    record = store.ensure_agent(build_spec())
    config = PrivacyConfig(pii="redact")
    one = AgentPrivacy.of(config, store.engine, record.id)
    other = AgentPrivacy.of(config, StateStore(make_engine(sqlite_url)).engine, record.id)
    assert await other.text("x@example.com") == "[email#1]"  # `other` has read its book (then empty)
    assert await one.text("a@example.com") == "[email#2]"
    # `other`'s book does not know #2 was given: storing #2 for b fails, it reads the book again, b is #3
    assert await other.text("b@example.com") == "[email#3]"
    assert await other.text("a@example.com") == "[email#2]"
    assert await one.text("b@example.com") == "[email#3]"  # `one` reads again when its insert fails likewise
    with store.engine.connect() as conn:
        rows = conn.execute(sqlalchemy.text("SELECT kind, number, digest FROM pii_placeholders")).all()
    assert sorted((kind, number) for kind, number, _ in rows) == [("email", 1), ("email", 2), ("email", 3)]
    assert all("example" not in digest for _, _, digest in rows)
