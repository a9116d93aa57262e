"""`DELETE /v1/agents/{name}?purge=true` through the ASGI app in process, over SQLite and a real Postgres: two
agents made from a template each say their canary (kept in a block, in archival memory and in the conversation);
one is purged; no byte of its canary is left in any file under PAGEMIND_HOME (SQLite and its WAL, the embedded
Qdrant shard) nor in any Postgres row, and the other agent is untouched and still finds its own. Then the same
through a running `pagemind serve` (`pagemind agents purge NAME --server URL`), and a purge a kill cut short
finished by the daemon's next start."""

from __future__ import annotations

import signal
import sqlite3
from pathlib import Path

import httpx
import pytest
import sqlalchemy

from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.models import FunctionModel, by_purpose
from tests.runtime.erasure.support import completion, files_holding
from tests.scheduler import test_serve
from tests.scheduler.test_serve import pagemind, start_serve, stop
from tests.support.asgi_daemon import asgi_daemon

stub, served_folder = test_serve.stub, test_serve.environment  # `pagemind serve`'s fixtures, under these names

TEMPLATE = """
name: companion
template: true
model: {name: gpt-4o-mini, context_window: 8192, max_output_tokens: 256}
system: You are a warm companion.
blocks: [{label: human, value: "", limit: 500}]
tools: [send_message, memory_rethink, archival_memory_insert, archival_search, conversation_search]
"""

KEEPER = """
name: keeper
model: {name: gpt-4o-mini}
system: You keep notes.
blocks: [{label: human, value: "", limit: 100}]
"""

CANARIES = {"u1": "UONECANARY5d1a", "u2": "UTWOCANARY8e4b"}


@pytest.fixture
async def served(tmp_path, database_url):
    async def respond(request):
        return completion({"messages": request.messages})

    files = {"companion.yaml": TEMPLATE, "keeper.yaml": KEEPER}
    model = FunctionModel(by_purpose(respond))
    async with asgi_daemon(tmp_path, database_url, files, model, concurrency=4, max_body=4096) as daemon:
        yield daemon.client, daemon.home, database_url


def rows_holding(database_url: str, canary: str) -> list[str]:
    """The Postgres tables of the test's schema with a row that holds the canary (in any column, as text)."""
    engine = sqlalchemy.create_engine(database_url)
    try:
        with engine.connect() as conn:
            names = sqlalchemy.inspect(conn).get_table_names()
            return [
                name
                for name in names
                if conn.execute(
                    sqlalchemy.text(f'SELECT 1 FROM "{name}" t WHERE t::text ILIKE :c LIMIT 1'), {"c": f"%{canary}%"}
                ).first()
            ]
    finally:
        engine.dispose()


async def test_purge_erases_one_agent_everywhere_and_the_other_keeps_everything(served):
    client, home, database_url = served
    for user, canary in CANARIES.items():
        assert (await client.post("/v1/agents", json={"template": "companion", "name": user})).status_code == 201
        for text in (f"my secret is {canary}", f"again {canary}"):
            run = await client.post(f"/v1/agents/{user}/messages", json={"content": text, "timeout_s": 30})
            assert run.status_code == 200 and run.json()["reply"] == f"echo: {text}", run.text
    memory = (await client.get("/v1/agents/u1/memory")).json()
    assert CANARIES["u1"] in str(memory)
    for user, canary in CANARIES.items():  # the recall index is filled by a search
        recall = await client.get(f"/v1/agents/{user}/memory/recall/search", params={"q": canary})
        assert canary in recall.text
    sqlite = database_url.startswith("sqlite")
    holding = (
        (lambda canary: files_holding(home.parent, canary)) if sqlite else (lambda c: rows_holding(database_url, c))
    )
    assert holding(CANARIES["u1"]) and holding(CANARIES["u2"])
    if not sqlite:  # (the tsvector holds it lower-cased: ILIKE)
        assert {"recall_fts", "messages", "blocks", "archival_memories"} <= set(holding(CANARIES["u1"]))

    purged = await client.delete("/v1/agents/u1", params={"purge": "true"})
    assert purged.status_code == 200, purged.text
    body = purged.json()
    assert body["name"] == "u1" and body["purged"] is True
    counts = body["counts"]
    assert counts["sql"]["messages"] >= 6 and counts["sql"]["archival_memories"] == 2 and counts["sql"]["agents"] == 1
    assert counts["vectors"]["points"] == 2 and counts["sql"]["embedding_cache"] > 0

    assert holding(CANARIES["u1"]) == []
    assert files_holding(home, CANARIES["u1"]) == []  # the embedded shard, traces
    assert holding(CANARIES["u2"])
    assert (await client.get("/v1/agents/u1")).status_code == 404
    assert [a["name"] for a in (await client.get("/v1/agents")).json()["agents"]] == ["keeper", "u2"]
    found = await client.get("/v1/agents/u2/memory/archival/search", params={"q": f"secret {CANARIES['u2']}"})
    assert found.status_code == 200 and CANARIES["u2"] in found.text, found.text
    recall = await client.get("/v1/agents/u2/memory/recall/search", params={"q": CANARIES["u2"]})
    assert recall.status_code == 200 and CANARIES["u2"] in recall.text, recall.text

    again = await client.delete("/v1/agents/u1", params={"purge": "true"})
    assert again.status_code == 404 and again.json()["error"]["code"] == "unknown_agent"
    assert (await client.post("/v1/agents", json={"template": "companion", "name": "u1"})).status_code == 201
    assert CANARIES["u1"] not in (await client.get("/v1/agents/u1/memory")).text  # the name is free, nothing came back


async def test_plain_delete_keeps_the_state_and_a_folder_agent_is_not_purged(served):
    client, home, database_url = served
    assert (await client.post("/v1/agents", json={"template": "companion", "name": "u1"})).status_code == 201
    run = await client.post("/v1/agents/u1/messages", json={"content": f"hi {CANARIES['u1']}", "timeout_s": 30})
    assert run.status_code == 200
    assert (await client.delete("/v1/agents/u1")).status_code == 204
    store = StateStore.open(database_url)
    assert [a.name for a in store.list_agents() if a.name.startswith("u1.deleted-")]  # kept, as documented
    store.engine.dispose()
    refused = await client.delete("/v1/agents/keeper", params={"purge": "true"})
    assert refused.status_code == 409 and refused.json()["error"]["code"] == "not_deletable"
    spec = (await client.get("/openapi.json")).json()["paths"]["/v1/agents/{name}"]["delete"]
    assert "purge" in [p["name"] for p in spec["parameters"]] and "200" in spec["responses"]
    assert "nothing of it is erased" in spec["description"]


# -- through `pagemind serve` -------------------------------------------------------------------------------------

CANARY_ONE, CANARY_TWO = "SERVEONE3c9d", "SERVETWO7a2f"


def test_a_purge_through_the_daemon_and_one_finished_by_its_next_start(served_folder):
    folder, env = served_folder
    home = Path(env["PAGEMIND_HOME"])
    process, url = start_serve(folder, env)
    try:
        for user, canary in (("u1", CANARY_ONE), ("u2", CANARY_TWO)):
            made = httpx.post(f"{url}/v1/agents", json={"template": "companion", "name": user})
            assert made.status_code == 201, made.text
            sent = pagemind(env, "send", user, f"my secret is {canary}", "--server", url)
            assert sent.returncode == 0 and canary in sent.stdout, sent.stderr
        purged = pagemind(env, "agents", "purge", "u1", "--server", url)
        assert purged.returncode == 0, purged.stderr
        assert purged.stdout.startswith("purged 'u1': ") and "messages " in purged.stdout
        listed = pagemind(env, "agents", "--server", url)
        assert "u1" not in listed.stdout.split() and "u2" in listed.stdout
    finally:
        code, stderr = stop(process)
    assert code == 0, stderr
    assert files_holding(home, CANARY_ONE) == [] and files_holding(home, CANARY_TWO)

    killed = pagemind({**env, "PAGEMIND_KILL_AT": "purge.rows_erased"}, "agents", "purge", "u2")
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    process, url = start_serve(folder, env)  # finishes it before it serves
    try:
        assert [a["name"] for a in httpx.get(f"{url}/v1/agents").json()["agents"]] == []
    finally:
        code, stderr = stop(process)
    assert code == 0, stderr
    with sqlite3.connect(home / "pagemind.db") as db:
        assert db.execute("SELECT count(*) FROM purges").fetchone() == (0,)
    assert files_holding(home, CANARY_TWO) == []
