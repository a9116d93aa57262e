"""Keys and ownership over the whole API: every route of `/openapi.json` (read from the document, so a route added
later is in the matrix without a line here) × {no key, wrong key, revoked key, another user's key, the owner's key,
admin}, against the app in process over a real daemon with a scripted model.

- no, wrong or revoked credential: 401 on every route but the open ones (probes);
- another user's key: the very answer an unknown agent or run gets (status, headers, body with the name swapped);
- the owner's key and the admin: success (2xx where the route has an example body, never 401/403/404);
- routes marked `x-admin-only`: 403 `admin_only` to every user key, success for the admin.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

import httpx
import pytest
import sqlalchemy

from pagemind.runtime.process.settings import Settings
from pagemind.runtime.state.keys import KeyStore
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.state.tables.archival import archival_memories
from pagemind.scheduler.api.app import OPEN_PATHS, create_app
from pagemind.scheduler.api.auth import ADMIN_ONLY, KeyRing
from pagemind.scheduler.catalog import AgentCatalog
from pagemind.scheduler.daemon import Daemon
from pagemind.scheduler.daemon_config import DaemonConfig
from tests.scheduler.api.test_api import KEEPER, TEMPLATE, scripted

TOKEN = "admin-token-for-tests"
UNKNOWN_AGENT = "zz-nobody-here"
UNKNOWN_RUN = "0" * 32
# Bodies of the routes that take one (a route without an example still runs the matrix: its owner then gets no
# 401/403/404, whatever its 4xx for a body it cannot use).
NAMES = itertools.count()
EXAMPLES: dict[tuple[str, str], Any] = {
    ("post", "/v1/agents"): lambda: {"template": "companion", "name": f"made-{next(NAMES)}"},
    ("post", "/v1/agents/{name}/messages"): lambda: {"content": "hello"},
    ("post", "/v1/agents/{name}/messages/stream"): lambda: {"content": "hello"},
    ("patch", "/v1/agents/{name}/memory/blocks/{label}"): lambda: {"value": "likes tea"},
    ("post", "/v1/agents/{name}/memory/archival"): lambda: {"content": "Lin likes green tea", "kind": "preference"},
    ("put", "/v1/agents/{name}/owner"): lambda: {"owner": "alice"},
    ("post", "/v1/keys"): lambda: {"user": "dave"},
    ("post", "/v1/agents/{name}/memory/forget"): lambda: {"query": "green tea"},
    ("post", "/v1/agents/{name}/memory/muted"): lambda: {"topic": "work"},
    ("patch", "/v1/agents/{name}/memory/review/{review_id}"): lambda: {"text": "Lin hums while she cooks"},
}


class Clock:
    """time.monotonic, moved by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
async def keyed(tmp_path, sqlite_url):
    """(client, daemon, credentials, clock): the API with the admin token and keys for alice and bob."""
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "companion.yaml").write_text(TEMPLATE)
    (folder / "keeper.yaml").write_text(KEEPER)
    store = StateStore.open(sqlite_url)
    daemon = Daemon(
        AgentCatalog(folder, store),
        Settings(home=tmp_path / "home", database_url=sqlite_url),
        model=scripted(),
        config=DaemonConfig(concurrency=4, poll_s=0.05),
    )
    keys = KeyStore(store.engine)
    _, alice = keys.create("alice")
    _, bob = keys.create("bob")
    _, revoked = keys.create("alice")
    keys.revoke(revoked)
    _, admin = keys.create(None, "admin")
    clock = Clock()
    await daemon.start()
    ring = KeyRing(keys, TOKEN, required=True, clock=clock)
    app = create_app(daemon, TOKEN, keyring=ring)
    daemon.test_keyring = ring  # the tests' handle on it
    credentials = {
        "none": {},
        "wrong": bearer("pm_" + "x" * 43),
        "revoked": bearer(revoked),
        "other": bearer(bob),
        "owner": bearer(alice),
        "admin": bearer(admin),
        "token": bearer(TOKEN),
    }
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
        yield client, daemon, credentials, clock
    daemon.pool.model.gate.set()  # turns a test left waiting for the scripted model
    await daemon.stop(5)


def bearer(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


async def alices_world(client: httpx.AsyncClient, owner: dict[str, str], admin: dict[str, str]) -> dict[str, str]:
    """A fresh agent of alice's (from the keeper template: it has archival memory), a finished run of it and a
    memory: the path parameters of every route."""
    name = f"alice-{next(NAMES)}"
    made = await client.post("/v1/agents", json={"template": "keeper", "name": name}, headers=owner)
    assert made.status_code == 201 and made.json()["owner"] == "alice", made.text
    run = await client.post(f"/v1/agents/{name}/messages", json={"content": "hi"}, headers=owner)
    assert run.status_code == 200, run.text
    memory = await client.post(f"/v1/agents/{name}/memory/archival", json={"content": "Lin hums"}, headers=admin)
    assert memory.status_code == 201, memory.text
    key = await client.post("/v1/keys", json={"user": "alice"}, headers=admin)
    assert key.status_code == 201, key.text
    return {
        "name": name,
        "run_id": run.json()["run_id"],
        "label": "human",
        "memory_id": memory.json()["id"],
        "key_id": key.json()["id"],
        "user": f"gone-{next(NAMES)}",  # a user with nothing (erasing alice here would take the owner's key)
        "model_id": "template:keeper",  # GET /v1/models/{model_id}: what the OpenAI-compatible proxy's `model` names
    }


def routes(document: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [
        (method, path, operation)
        for path, item in document["paths"].items()
        for method, operation in item.items()
        if method in ("get", "post", "put", "patch", "delete")
    ]


def query_of(operation: dict[str, Any]) -> dict[str, str]:
    """A value for each required query parameter (a search's `q`)."""
    return {p["name"]: "tea" for p in operation.get("parameters", []) if p["in"] == "query" and p.get("required")}


async def call(
    client: httpx.AsyncClient, method: str, path: str, operation: dict[str, Any], params: dict[str, str], headers
) -> httpx.Response:
    example = EXAMPLES.get((method, path))
    body = example() if example is not None else ({} if "requestBody" in operation else None)
    return await client.request(
        method, path.format(**params), params=query_of(operation), json=body, headers={**headers}
    )


def same_answer(answer: httpx.Response, unknown: httpx.Response, real: dict[str, str], fake: dict[str, str]) -> None:
    """`answer` (for something that exists, not the caller's) is `unknown`'s (for something that does not), with
    the unknown names written as the real ones."""
    text = unknown.text
    for key in ("name", "run_id"):
        text = text.replace(fake[key], real[key])
    assert answer.status_code == unknown.status_code == 404
    assert answer.json() == json.loads(text)
    assert {k: v for k, v in answer.headers.items() if k != "content-length"} == {
        k: v for k, v in unknown.headers.items() if k != "content-length"
    }


async def held_for_review(daemon, world: dict[str, str], path: str) -> dict[str, str]:
    """`world` with a memory of its agent's held for review (`review_id`) when `path` names one: a decision takes
    it, so each call gets its own."""
    if "{review_id}" not in path:
        return world
    async with daemon.agent(world["name"]) as agent:
        review_id = await agent.review_queue.hold("extraction", f"Lin hums while cooking {next(NAMES)}")
    return {**world, "review_id": review_id}


async def test_every_route_times_every_credential(keyed):
    client, daemon, creds, _ = keyed
    document = (await client.get("/openapi.json")).json()
    found = routes(document)
    assert len(found) >= 16  # the document lists the API (a route missing from it would escape the matrix)
    shared = {**await alices_world(client, creds["owner"], creds["admin"]), "review_id": "none-held"}
    fake = {**shared, "name": UNKNOWN_AGENT, "run_id": UNKNOWN_RUN}
    for method, path, operation in found:
        case = f"{method.upper()} {path}"
        if path in OPEN_PATHS:
            for who in creds:
                assert (await call(client, method, path, operation, shared, creds[who])).status_code == 200, case
            continue
        for who in ("none", "wrong", "revoked"):
            answer = await call(client, method, path, operation, shared, creds[who])
            assert answer.status_code == 401, (case, who, answer.text)
            assert answer.json()["error"]["code"] == "unauthorized" and answer.headers["www-authenticate"] == "Bearer"
        admin_only = operation.get(ADMIN_ONLY, False)
        names_one = "{name}" in path or "{run_id}" in path
        for who in ("other", "owner"):
            world = await alices_world(client, creds["owner"], creds["admin"]) if method == "delete" else shared
            world = await held_for_review(daemon, world, path)
            answer = await call(client, method, path, operation, world, creds[who])
            if admin_only:
                assert answer.status_code == 403 and answer.json()["error"]["code"] == "admin_only", (case, who)
            elif who == "other" and names_one:
                unknown = await call(client, method, path, operation, {**world, **fake}, creds["admin"])
                same_answer(answer, unknown, world, {**world, **fake})
                again = await call(client, method, path, operation, {**world, **fake}, creds["other"])
                same_answer(answer, again, world, {**world, **fake})
            else:
                succeeded(answer, case, who, (method, path) in EXAMPLES or "requestBody" not in operation)
        for who in ("admin", "token"):
            world = await alices_world(client, creds["owner"], creds["admin"]) if method == "delete" else shared
            world = await held_for_review(daemon, world, path)
            answer = await call(client, method, path, operation, world, creds[who])
            succeeded(answer, case, who, (method, path) in EXAMPLES or "requestBody" not in operation)


def succeeded(answer: httpx.Response, case: str, who: str, known_body: bool) -> None:
    assert answer.status_code not in (401, 403, 404), (case, who, answer.text)
    if known_body:
        assert answer.status_code < 300, (case, who, answer.text)


async def test_a_user_key_lists_and_makes_only_its_users_agents(keyed):
    client, _, creds, _ = keyed
    await alices_world(client, creds["owner"], creds["admin"])
    bobs = await client.post("/v1/agents", json={"template": "companion", "name": "bob-1"}, headers=creds["other"])
    assert bobs.status_code == 201 and bobs.json()["owner"] == "bob"
    alice_sees = {a["name"] for a in (await client.get("/v1/agents", headers=creds["owner"])).json()["agents"]}
    bob_sees = {a["name"] for a in (await client.get("/v1/agents", headers=creds["other"])).json()["agents"]}
    admin_sees = {a["name"] for a in (await client.get("/v1/agents", headers=creds["admin"])).json()["agents"]}
    assert bob_sees == {"bob-1"} and alice_sees and not alice_sees & bob_sees
    assert alice_sees | bob_sees | {"keeper"} <= admin_sees  # the folder's agent is nobody's: admins only
    given = await client.post(
        "/v1/agents", json={"template": "companion", "name": "gift", "owner": "alice"}, headers=creds["other"]
    )
    assert given.status_code == 403 and given.json()["error"]["code"] == "admin_only"
    made = await client.post(
        "/v1/agents", json={"template": "companion", "name": "gift", "owner": "alice"}, headers=creds["admin"]
    )
    assert made.status_code == 201 and made.json()["owner"] == "alice"
    assert (await client.get("/v1/agents/gift", headers=creds["owner"])).status_code == 200
    odd = await client.post(
        "/v1/agents", json={"template": "companion", "name": "odd", "owner": "a b"}, headers=creds["admin"]
    )
    assert odd.status_code == 422


async def test_an_admin_assigns_an_agent_and_the_old_owner_loses_it(keyed):
    client, daemon, creds, _ = keyed
    world = await alices_world(client, creds["owner"], creds["admin"])
    name = world["name"]
    moved = await client.put(f"/v1/agents/{name}/owner", json={"owner": "bob"}, headers=creds["admin"])
    assert moved.status_code == 200 and moved.json()["owner"] == "bob"
    assert (await client.get(f"/v1/agents/{name}", headers=creds["owner"])).status_code == 404
    assert (await client.get(f"/v1/runs/{world['run_id']}", headers=creds["owner"])).status_code == 404
    assert (await client.get(f"/v1/runs/{world['run_id']}", headers=creds["other"])).status_code == 200
    stored = await client.post(
        f"/v1/agents/{name}/memory/archival", json={"content": "Bo rows"}, headers=creds["other"]
    )
    assert stored.status_code == 201
    async with daemon.agent(name) as agent:
        assert agent.archival.user_id == "bob"  # the tenancy field is set from the owner
    with daemon.store.engine.connect() as conn:
        rows = conn.execute(
            sqlalchemy.select(archival_memories.c.user_id).where(archival_memories.c.id == stored.json()["id"])
        ).all()
    assert [r.user_id for r in rows] == ["bob"]
    keeper = await client.put("/v1/agents/keeper/owner", json={"owner": "alice"}, headers=creds["admin"])
    assert keeper.status_code == 200  # a folder agent too
    assert (await client.get("/v1/agents/keeper", headers=creds["owner"])).status_code == 200


async def test_a_revoked_key_stops_working_at_once_here_and_within_the_cache_time_elsewhere(keyed):
    client, daemon, creds, clock = keyed
    keys = KeyStore(daemon.store.engine)
    record, key = keys.create("carol")
    assert (await client.get("/v1/agents", headers=bearer(key))).status_code == 200  # now cached
    keys.revoke(record.id)  # as `pagemind keys revoke` does, from another process: the cache does not know
    assert (await client.get("/v1/agents", headers=bearer(key))).status_code == 200
    clock.now += daemon.config.key_cache_s
    assert (await client.get("/v1/agents", headers=bearer(key))).status_code == 401
    record, key = keys.create("carol")
    assert (await client.get("/v1/agents", headers=bearer(key))).status_code == 200
    ring = daemon.test_keyring
    ring.forget({k.id for k in keys.revoke_user("carol")})  # a revocation through this process: at once
    assert (await client.get("/v1/agents", headers=bearer(key))).status_code == 401


async def test_past_its_requests_per_minute_a_key_gets_429_with_retry_after(keyed):
    client, daemon, creds, clock = keyed
    limit = daemon.config.key_requests_per_minute
    answers = [(await client.get("/v1/agents", headers=creds["owner"])).status_code for _ in range(limit)]
    assert answers == [200] * limit
    refused = await client.get("/v1/agents", headers=creds["owner"])
    assert refused.status_code == 429 and refused.json()["error"]["code"] == "rate_limited"
    assert refused.headers["retry-after"] == "1"  # one request's worth of the bucket: 60 / 600 s, rounded up
    assert (await client.get("/v1/agents", headers=creds["other"])).status_code == 200  # per key
    assert (await client.get("/v1/agents", headers=creds["admin"])).status_code == 200  # admins are not limited
    clock.now += int(refused.headers["retry-after"])
    assert (await client.get("/v1/agents", headers=creds["owner"])).status_code == 200


async def test_past_its_turns_in_flight_a_user_gets_429(keyed):
    client, daemon, creds, _ = keyed
    world = await alices_world(client, creds["owner"], creds["admin"])
    limit = daemon.config.key_turns_in_flight
    sent = [
        await client.post(
            f"/v1/agents/{world['name']}/messages",
            json={"content": f"slow {i}", "mode": "async"},
            headers=creds["owner"],
        )
        for i in range(limit)
    ]
    assert [s.status_code for s in sent] == [202] * limit
    refused = await client.post(
        f"/v1/agents/{world['name']}/messages", json={"content": "one more", "mode": "async"}, headers=creds["owner"]
    )
    assert refused.status_code == 429 and refused.json()["error"]["code"] == "too_many_turns"
    assert int(refused.headers["retry-after"]) >= 1
    streamed = await client.post(
        f"/v1/agents/{world['name']}/messages/stream", json={"content": "and one"}, headers=creds["owner"]
    )
    assert streamed.status_code == 429
    admin = await client.post(
        f"/v1/agents/{world['name']}/messages", json={"content": "admin's", "mode": "async"}, headers=creds["admin"]
    )
    assert admin.status_code == 202  # the operator is not limited


async def test_keys_and_owners_hold_on_either_database(tmp_path, database_url):
    """The lookups the matrix makes on SQLite, on Postgres too (where they are awaited)."""
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "companion.yaml").write_text(TEMPLATE)
    store = StateStore.open(database_url)
    keys = KeyStore(store.engine)
    _, alice = keys.create("alice")
    _, bob = keys.create("bob")
    daemon = Daemon(
        AgentCatalog(folder, store),
        Settings(home=tmp_path / "home", database_url=database_url),
        model=scripted(),
        config=DaemonConfig(concurrency=2, poll_s=0.05),
    )
    await daemon.start()
    try:
        app = create_app(daemon, None)  # no token: the keys in the database make auth required
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
            assert (await client.get("/v1/agents")).status_code == 401
            made = await client.post("/v1/agents", json={"template": "companion", "name": "a-1"}, headers=bearer(alice))
            assert made.status_code == 201 and made.json()["owner"] == "alice"
            run = await client.post("/v1/agents/a-1/messages", json={"content": "hi"}, headers=bearer(alice))
            assert run.status_code == 200, run.text
            run_id = run.json()["run_id"]
            assert (await client.get(f"/v1/runs/{run_id}", headers=bearer(alice))).status_code == 200
            for path in ("/v1/agents/a-1", f"/v1/runs/{run_id}", "/v1/agents/a-1/memory"):
                theirs = await client.get(path, headers=bearer(bob))
                unknown = await client.get(path.replace("a-1", "b-1").replace(run_id, UNKNOWN_RUN), headers=bearer(bob))
                assert theirs.status_code == unknown.status_code == 404
                assert theirs.json()["error"]["code"] == unknown.json()["error"]["code"]
            assert (await client.get("/v1/agents", headers=bearer(bob))).json()["agents"] == []
            keys.revoke_user("alice")
            daemon_ring = app.state.keyring
            daemon_ring.forget({k.id for k in keys.all()})
            assert (await client.get("/v1/agents", headers=bearer(alice))).status_code == 401
    finally:
        await daemon.stop(5)
        store.engine.dispose()


async def test_an_admin_makes_lists_and_revokes_keys_through_the_api(keyed):
    client, _, creds, _ = keyed
    made = await client.post("/v1/keys", json={"user": "erin"}, headers=creds["token"])
    assert made.status_code == 201 and made.json()["user"] == "erin" and made.json()["key"].startswith("pm_")
    key, key_id = made.json()["key"], made.json()["id"]
    assert (await client.get("/v1/agents", headers=bearer(key))).status_code == 200
    listing = (await client.get("/v1/keys", headers=creds["admin"])).json()["keys"]
    assert key_id in {k["id"] for k in listing} and key not in json.dumps(listing)
    assert (await client.post("/v1/keys", json={}, headers=creds["admin"])).status_code == 422  # a user key's user
    assert (await client.get("/v1/keys", headers=bearer(key))).status_code == 403
    assert (await client.delete(f"/v1/keys/{key_id}", headers=creds["admin"])).status_code == 204
    assert (await client.get("/v1/agents", headers=bearer(key))).status_code == 401  # at once: cached before
    gone = await client.delete(f"/v1/keys/{key_id}", headers=creds["admin"])
    assert gone.status_code == 404 and gone.json()["error"]["code"] == "unknown_key"


async def test_a_user_key_never_takes_over_a_stored_agent_of_the_same_name(keyed, tmp_path):
    """An agent stored by `pagemind run` (or half made) with the very spec a create would make is adopted by an
    admin's create, as before keys; a user key's create of that name is refused: it would get that memory."""
    from pagemind.runtime.spec.loading import load_spec

    client, daemon, creds, _ = keyed
    spec = load_spec(tmp_path / "agents" / "companion.yaml").model_copy(update={"name": "lone", "template": False})
    daemon.store.ensure_agent(spec)
    taken = await client.post("/v1/agents", json={"template": "companion", "name": "lone"}, headers=creds["owner"])
    assert taken.status_code == 409 and taken.json()["error"]["code"] == "agent_exists"
    assert KeyStore(daemon.store.engine).owner_of("lone") is None
    adopted = await client.post("/v1/agents", json={"template": "companion", "name": "lone"}, headers=creds["admin"])
    assert adopted.status_code == 201, adopted.text


async def test_readiness_names_the_broken_files_to_admins_alone(keyed, tmp_path):
    client, daemon, creds, _ = keyed
    (tmp_path / "agents" / "broken.yaml").write_text("name: [unclosed\n")
    daemon.catalog.folder.rescan()
    for who, shown in (("none", False), ("wrong", False), ("owner", False), ("admin", True), ("token", True)):
        body = (await client.get("/v1/ready", headers=creds[who])).json()
        assert body["agents_folder_error_count"] == 1
        assert ("agents_folder_errors" in body) is shown, who
