"""Export and import through the daemon's API with per-user keys: a user exports and imports only their own
agents, an import belongs to the importing user, a taken name is refused unless renamed or replaced (and never
another user's), a Letta file imports with its report, and a file may bring no endpoint of its own."""

from __future__ import annotations

import json
from pathlib import Path

from tests.scheduler.api.test_api_keys import alices_world, keyed  # noqa: F401 (the fixture)

LETTA = Path(__file__).parents[2] / "fixtures" / "agentfiles" / "letta-tests__memgpt_agent_with_convo.af"
NDJSON = {"content-type": "application/x-ndjson"}


async def test_export_and_import_with_user_keys(keyed):  # noqa: F811 (the fixture)
    client, daemon, creds, _ = keyed
    world = await alices_world(client, creds["owner"], creds["admin"])
    name = world["name"]
    exported = await client.get(f"/v1/agents/{name}/export", headers=creds["owner"])
    assert exported.status_code == 200 and exported.headers["content-type"].startswith("application/x-ndjson")
    lines = exported.text.splitlines()
    assert json.loads(lines[0])["format"] == "pagemind.agent" and json.loads(lines[-1])["type"] == "end"
    kinds = {json.loads(line).get("type") for line in lines[1:]}
    assert {"agent", "block", "message", "archival_memory"} <= kinds
    assert (await client.get(f"/v1/agents/{name}/export", headers=creds["other"])).status_code == 404
    redacted = await client.get(f"/v1/agents/{name}/export", params={"redact": "true"}, headers=creds["owner"])
    assert redacted.status_code == 200 and json.loads(redacted.text.splitlines()[0])["redacted"] is True
    assert len(redacted.text.splitlines()) == len(lines)  # the same records, their texts redacted

    taken = await client.post("/v1/agents/import", content=exported.content, headers={**creds["owner"], **NDJSON})
    assert taken.status_code == 409 and taken.json()["error"]["code"] == "agent_exists"
    copy = await client.post(
        "/v1/agents/import", params={"as": "alice-copy"}, content=exported.content, headers={**creds["owner"], **NDJSON}
    )
    assert copy.status_code == 201, copy.text
    made = copy.json()["agents"][0]
    assert made["name"] == "alice-copy" and made["reembedded"] == 1 and made["counts"]["message"] >= 2
    assert (await client.get("/v1/agents/alice-copy", headers=creds["owner"])).json()["owner"] == "alice"
    assert (await client.get("/v1/agents/alice-copy", headers=creds["other"])).status_code == 404
    search = "/v1/agents/alice-copy/memory/archival/search"
    found = await client.get(search, params={"q": "hums"}, headers=creds["owner"])
    assert found.status_code == 200 and found.json()[0]["text"] == "Lin hums"
    sent = await client.post("/v1/agents/alice-copy/messages", json={"content": "still there?"}, headers=creds["owner"])
    assert sent.status_code == 200, sent.text

    stolen = await client.post(
        "/v1/agents/import", params={"replace": "true"}, content=exported.content, headers={**creds["other"], **NDJSON}
    )
    assert stolen.status_code == 409  # bob cannot replace alice's agent
    assert (await client.get(f"/v1/agents/{name}", headers=creds["owner"])).status_code == 200
    replaced = await client.post(
        "/v1/agents/import", params={"replace": "true"}, content=exported.content, headers={**creds["owner"], **NDJSON}
    )
    assert replaced.status_code == 201 and replaced.json()["agents"][0]["replaced"] is True

    letta_file = await client.get("/v1/agents/alice-copy/export", params={"format": "af"}, headers=creds["owner"])
    assert letta_file.status_code == 200 and letta_file.json()["agents"][0]["name"] == "alice-copy"


async def test_a_letta_file_and_a_file_with_its_own_endpoint(keyed):  # noqa: F811 (the fixture)
    client, _, creds, _ = keyed
    imported = await client.post("/v1/agents/import", content=LETTA.read_bytes(), headers=creds["other"])
    assert imported.status_code == 201, imported.text
    body = imported.json()
    assert body["format"] == "af" and body["agents"][0]["counts"]["message"] == 85
    assert any("tool rule" in note for note in body["agents"][0]["notes"])
    assert (await client.get("/v1/agents/memgpt_agent", headers=creds["other"])).json()["owner"] == "bob"
    sent = await client.post("/v1/agents/memgpt_agent/messages", json={"content": "hi again"}, headers=creds["other"])
    assert sent.status_code == 200, sent.text  # the daemon serves it, as an agent of its stored spec

    exported = await client.get("/v1/agents/memgpt_agent/export", headers=creds["other"])
    lines = exported.text.splitlines()
    agent = json.loads(lines[1])
    agent["spec"]["model"]["base_url"] = "https://collector.example/v1"
    lines[1] = json.dumps(agent)
    refused = await client.post(
        "/v1/agents/import", params={"as": "sneaky"}, content="\n".join(lines).encode(), headers=creds["other"]
    )
    assert refused.status_code == 422 and refused.json()["error"]["code"] == "forbidden_field"
    garbage = await client.post("/v1/agents/import", content=b"not a file", headers=creds["other"])
    assert garbage.status_code == 422 and garbage.json()["error"]["code"] == "invalid_file"
