"""API keys and agent owners in SQL (`runtime.state.keys`), on SQLite and Postgres: hashes only, revocation by key,
id or user, the owner column and its reads."""

from __future__ import annotations

import hashlib

import pytest
import sqlalchemy

from pagemind.runtime.state.keys import PREFIX, KeyInputError, KeyStore, hash_key
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.specs import build_spec


@pytest.fixture
def stores(database_url):
    store = StateStore.open(database_url)
    yield store, KeyStore(store.engine)
    store.engine.dispose()


def test_a_key_is_stored_as_its_hash_alone_and_found_by_it(stores):
    store, keys = stores
    record, key = keys.create("u123")
    assert key.startswith(PREFIX) and len(key) == len(PREFIX) + 43
    assert record.scope == "user" and record.user == "u123" and not record.admin and record.id.startswith("key_")
    with store.engine.connect() as conn:
        rows = [dict(r._mapping) for r in conn.execute(sqlalchemy.text("SELECT * FROM api_keys"))]
    assert len(rows) == 1 and rows[0]["key_hash"] == hashlib.sha256(key.encode()).hexdigest() == hash_key(key)
    assert key not in repr(rows)  # the key itself is nowhere in the row
    assert keys.find(key) == record
    assert keys.find(key[:-1] + ("A" if key[-1] != "A" else "B")) is None
    assert keys.find("not-a-key") is None
    admin, admin_key = keys.create(None, "admin")
    assert admin.admin and admin.user is None and keys.find(admin_key) == admin
    assert [k.id for k in keys.all()] == [record.id, admin.id]


async def test_the_awaited_lookups_answer_as_the_plain_ones(stores):
    store, keys = stores
    record, key = keys.create("u1")
    assert await keys.find_awaited(key) == record
    assert await keys.find_awaited(PREFIX + "x" * 43) is None
    agent = store.ensure_agent(build_spec(name="a1"))
    keys.assign(agent.id, "u1")
    assert await keys.owner_awaited("a1") == "u1" == keys.owner_of("a1") == keys.owner_of_id(agent.id)
    assert await keys.owner_awaited("nobody") is None
    assert await keys.owner_of_id_awaited(agent.id) == "u1" and await keys.owner_of_id_awaited(agent.id + 99) is None


def test_revoke_by_key_by_id_and_by_user(stores):
    _, keys = stores
    first, first_key = keys.create("u1")
    second, second_key = keys.create("u1")
    other, other_key = keys.create("u2")
    assert [k.id for k in keys.revoke(first_key)] == [first.id]
    assert keys.find(first_key) is None and keys.find(second_key) is not None
    assert keys.revoke(first_key) == []  # revoked already
    assert [k.id for k in keys.revoke(other.id)] == [other.id] and keys.find(other_key) is None
    third, third_key = keys.create("u1")
    assert {k.id for k in keys.revoke_user("u1")} == {second.id, third.id}
    assert keys.find(second_key) is None and keys.find(third_key) is None
    assert all(k.revoked_at is not None for k in keys.all()) and keys.all(revoked=False) == []
    assert not keys.any_live()


def test_bad_input_is_one_clear_error(stores):
    _, keys = stores
    with pytest.raises(KeyInputError, match="needs the user"):
        keys.create(None)
    with pytest.raises(KeyInputError, match="scope"):
        keys.create("u1", "root")
    for bad in ("", "a b", "-dash", "x" * 129, "é"):
        with pytest.raises(KeyInputError, match="user id"):
            keys.create(bad)
    assert keys.all() == []


def test_owners_of_agents(stores):
    store, keys = stores
    a = store.ensure_agent(build_spec(name="a"))
    b = store.ensure_agent(build_spec(name="b"))
    assert keys.owner_of("a") is None and store.get_agent("a").owner is None
    keys.assign(a.id, "u1")
    assert keys.assign_by_name("b", "u1") and not keys.assign_by_name("missing", "u1")
    assert set(keys.owned_ids("u1")) == {a.id, b.id} and keys.owned_names("u1") == {"a", "b"}
    assert store.get_agent("a").owner == "u1"  # the agent's record carries it (its archival memory's user_id)
    keys.assign(b.id, None)
    assert keys.owned_names("u1") == {"a"} and keys.owned_ids("u2") == []
