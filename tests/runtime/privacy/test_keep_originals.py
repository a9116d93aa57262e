"""`privacy.keep_originals: true` (issue 35, item 1): the original behind each placeholder is kept, sealed under
the store's data key, and the reply the user gets shows it; the model, the stored messages, the traces and the
database bytes keep the placeholder. Without encryption at rest the agent does not load."""

from __future__ import annotations

import pytest

from pagemind.runtime.agent import Agent
from pagemind.runtime.crypto.keys import Encryption, new_key_text, parse_key
from pagemind.runtime.privacy.policy import OriginalsNeedEncryption
from pagemind.runtime.process.settings import Settings
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.models import FunctionModel, by_purpose
from pagemind.runtime.testing.responses import tool_call_body
from pagemind.runtime.testing.specs import build_spec
from tests.runtime.crypto.support import files_holding, postgres_rows_text, session_url

PHONE = "13912345678"
SPEC = build_spec("keeper", privacy={"pii": "redact", "keep_originals": True})


def answer_with_the_placeholder(request) -> dict:
    """The model calls the user back at the number it was given: a placeholder, all it ever sees."""
    said = [m for m in request.messages if m["role"] == "user"][-1]["content"]
    assert PHONE not in str(request.messages)
    placeholder = said[said.index("[phone#") : said.index("]", said.index("[phone#")) + 1]
    return tool_call_body("send_message", {"message": f"I'll call you at {placeholder} tonight."})


async def test_the_reply_shows_the_kept_original_and_nothing_stores_it_in_the_clear(database_url, tmp_path):
    home = tmp_path / "home"
    home.mkdir()
    url = session_url(database_url, home)
    key = new_key_text()
    settings = Settings(home=home, database_url=url, encryption_key=key)
    store = StateStore.open(url, Encryption(parse_key(key, "test")))
    model = FunctionModel(by_purpose(answer_with_the_placeholder))
    agent = await Agent.load(SPEC, model=model, store=store, settings=settings)
    try:
        reply = await agent.send(f"My new number is {PHONE}, call me.")
        assert reply == f"I'll call you at {PHONE} tonight."
        stored = " ".join(str(m.content) + str(m.tool_calls) for m in store.all_messages(agent.record.id))
        assert "[phone#1]" in stored and PHONE not in stored
    finally:
        store.engine.dispose()
    if database_url.startswith("postgresql"):
        assert PHONE not in postgres_rows_text(database_url)
    else:
        assert files_holding(home, PHONE) == []


async def test_without_encryption_at_rest_the_agent_does_not_load(sqlite_url):
    store = StateStore.open(sqlite_url)
    with pytest.raises(OriginalsNeedEncryption, match="PAGEMIND_ENCRYPTION_KEY"):
        await Agent.load(SPEC, model=FunctionModel(lambda r: {}), store=store)
    store.engine.dispose()
