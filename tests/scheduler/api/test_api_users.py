"""Erasing an end user through the API (`DELETE /v1/users/{user}`, admin keys only): their keys stop working at
once, every agent made for them is purged, their keys are deleted, and nobody else's agent or key is touched."""

from __future__ import annotations

from pagemind.runtime.state.keys import KeyStore
from tests.scheduler.api.test_api_keys import bearer, keyed  # noqa: F401 (the fixture)


async def test_an_admin_erases_a_user_and_nothing_of_anyone_else(keyed):  # noqa: F811 (the fixture)
    client, daemon, creds, _ = keyed
    for name in ("alice-a", "alice-b"):
        made = await client.post("/v1/agents", json={"template": "keeper", "name": name}, headers=creds["owner"])
        assert made.status_code == 201, made.text
        sent = await client.post(f"/v1/agents/{name}/messages", json={"content": "hi"}, headers=creds["owner"])
        assert sent.status_code == 200, sent.text
    bobs = await client.post("/v1/agents", json={"template": "keeper", "name": "bob-a"}, headers=creds["other"])
    assert bobs.status_code == 201

    refused = await client.delete("/v1/users/alice", headers=creds["owner"])
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "admin_only"
    erased = await client.delete("/v1/users/alice", headers=creds["admin"])
    assert erased.status_code == 200, erased.text
    body = erased.json()
    assert body["user"] == "alice" and sorted(a["name"] for a in body["agents"]) == ["alice-a", "alice-b"]
    assert all(a["counts"]["sql"].get("messages") for a in body["agents"])
    assert body["kept"] == [] and body["keys_deleted"] == 2  # her live key and the revoked one

    assert (await client.get("/v1/agents", headers=creds["owner"])).status_code == 401  # her key is gone
    for name in ("alice-a", "alice-b"):
        assert (await client.get(f"/v1/agents/{name}", headers=creds["admin"])).status_code == 404
    assert (await client.get("/v1/agents/bob-a", headers=creds["other"])).status_code == 200
    users = {key.user for key in KeyStore(daemon.store.engine).all()}
    assert "alice" not in users and "bob" in users

    again = await client.delete("/v1/users/alice", headers=creds["admin"])
    assert again.status_code == 200 and again.json() == {"user": "alice", "agents": [], "kept": [], "keys_deleted": 0}
    bad = await client.delete("/v1/users/a b", headers=creds["admin"])
    assert bad.status_code == 400 and bad.json()["error"]["code"] == "invalid_user"
