"""An agent with `privacy: {pii: redact}` told a phone number, a card and an e-mail address, and a model that writes
them (as if it knew them) into a core block, archival memory and its reply: afterwards no byte of any file under
PAGEMIND_HOME or of the database (SQLite with its WAL; every row of every table on PostgreSQL) holds them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import sqlalchemy

from pagemind.runtime.agent import Agent
from pagemind.runtime.loop import run_turn
from pagemind.runtime.process.settings import Settings
from pagemind.runtime.state.engine import make_engine
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.specs import build_spec
from pagemind.runtime.trace.recorder import record
from tests.support.model_server import last_turn_message, last_user_text, model_server, tool_calls

PHONE, CARD, EMAIL = "+86 139 1234 5678", "4111 1111 1111 1111", "lin.canary@example.com"
# Every spelling in which an original could have been kept.
ORIGINALS = ("13912345678", "139 1234 5678", "4111111111111111", "4111 1111 1111 1111", "lin.canary")
TOOLS = ["send_message", "memory_rethink", "archival_memory_insert", "archival_search", "conversation_search"]
LEAK = f"(and, from nowhere, {PHONE}, {CARD}, {EMAIL})"  # what a model could write without having seen it


def completion(seen: list[str]) -> Any:
    def answer(body: dict[str, Any]) -> dict[str, Any]:
        said = last_user_text(body)
        seen.append(said)
        if last_turn_message(body).get("role") == "user":
            return tool_calls(
                ("memory_rethink", {"label": "human", "new_value": f"Notes: {said} {LEAK}"}),
                ("archival_memory_insert", {"content": f"The user said: {said} {LEAK}"}),
            )
        return tool_calls(("send_message", {"message": f"noted: {said} {LEAK}"}))

    return answer


def holding(folder: Path) -> list[str]:
    """Files under `folder` whose bytes hold any original."""
    return sorted(
        str(path)
        for path in folder.rglob("*")
        if path.is_file() and any(o.encode() in path.read_bytes() for o in ORIGINALS)
    )


def rows_holding(url: str) -> list[str]:
    """Rows of every table (PostgreSQL: each row as text) that hold any original."""
    engine = sqlalchemy.create_engine(url)
    found = []
    with engine.connect() as conn:
        tables = conn.execute(
            sqlalchemy.text("SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()")
        ).scalars()
        for table in list(tables):
            for (row,) in conn.execute(sqlalchemy.text(f'SELECT CAST(t AS text) FROM "{table}" t')):
                found += [f"{table}: {row[:120]}" for o in ORIGINALS if o in row]
    engine.dispose()
    return found


async def test_no_original_reaches_any_store(database_url, isolated_home, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    seen: list[str] = []
    with model_server(completion(seen)) as url:
        spec = build_spec("private", model={"name": "m", "base_url": url}, tools=TOOLS, privacy={"pii": "redact"})
        store = StateStore(make_engine(database_url))
        agent = await Agent.load(spec, store=store, settings=Settings.from_env())
        recorder = record(agent, path=isolated_home / "traces" / "private.jsonl")
        first = await run_turn(agent, f"my phone is {PHONE}, card {CARD}, mail {EMAIL}")
        second = await run_turn(agent, f"again: {PHONE}")
        recorder.close()
    store.engine.dispose()

    assert seen[0] == "my phone is [phone#1], card [card#1], mail [email#1]"  # what the model was shown
    assert seen[-1] == "again: [phone#1]"  # the same number in the next turn
    assert first.reply is not None and "[phone#1]" in first.reply and "[card#1]" in first.reply
    assert second.reply is not None and "139" not in second.reply
    assert "[email#1]" in agent.memory.get("human").value
    assert (isolated_home / "traces" / "private.jsonl").stat().st_size > 0
    assert any(path.is_file() for path in (isolated_home).rglob("*") if "qdrant" in str(path) or "vector" in str(path))
    assert holding(isolated_home) == []  # vectors' payloads, traces
    assert holding(tmp_path) == []  # SQLite's database and WAL (on PostgreSQL: nothing here)
    if database_url.startswith("postgresql"):
        assert rows_holding(database_url) == []


async def test_an_agent_that_keeps_stores_as_before(sqlite_url, isolated_home, tmp_path, monkeypatch):
    """The default policy changes nothing, and the scan above would see the originals if they were there."""
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    seen: list[str] = []
    with model_server(completion(seen)) as url:
        spec = build_spec("plain", model={"name": "m", "base_url": url}, tools=TOOLS)
        agent = await Agent.load(spec, store=StateStore(make_engine(sqlite_url)), settings=Settings.from_env())
        await run_turn(agent, f"my phone is {PHONE}")
    assert seen[0] == f"my phone is {PHONE}"
    assert holding(isolated_home) != [] and holding(tmp_path) != []
