"""`pagemind keys create|list|revoke` and `pagemind agents assign`, run as a user runs them (a subprocess)."""

from __future__ import annotations

from pagemind.runtime.state.keys import PREFIX, KeyStore
from pagemind.runtime.state.store import StateStore
from pagemind.runtime.testing.specs import build_spec
from tests.runtime.cli.test_cli import pagemind


def keys_of(tmp_path) -> KeyStore:
    return KeyStore(StateStore.open(f"sqlite:///{tmp_path / 'home' / 'pagemind.db'}").engine)


def test_create_list_and_revoke_keys(tmp_path):
    made = pagemind(tmp_path, "keys", "create", "--user", "u123")
    assert made.returncode == 0, made.stderr
    *said, key = made.stdout.strip().splitlines()
    assert key.startswith(PREFIX) and " " not in key  # the key alone on the last line
    key_id = said[0].split()[1]
    assert key_id.startswith("key_") and "u123" in said[0]
    found = keys_of(tmp_path).find(key)
    assert found is not None and found.user == "u123" and found.id == key_id
    admin = pagemind(tmp_path, "keys", "create", "--scope", "admin")
    admin_key = admin.stdout.strip().splitlines()[-1]
    assert admin.returncode == 0 and keys_of(tmp_path).find(admin_key).admin

    listed = pagemind(tmp_path, "keys", "list")
    assert listed.returncode == 0 and key_id in listed.stdout and "live" in listed.stdout
    assert key not in listed.stdout and admin_key not in listed.stdout  # shown once: never listed

    by_id = pagemind(tmp_path, "keys", "revoke", key_id)
    assert by_id.returncode == 0 and key_id in by_id.stdout and keys_of(tmp_path).find(key) is None
    again = pagemind(tmp_path, "keys", "revoke", key)  # by the key itself: revoked already
    assert again.returncode == 2 and "no live key" in again.stderr and "Traceback" not in again.stderr
    assert "revoked" in pagemind(tmp_path, "keys", "list").stdout

    first = pagemind(tmp_path, "keys", "create", "--user", "u9").stdout.strip().splitlines()[-1]
    second = pagemind(tmp_path, "keys", "create", "--user", "u9").stdout.strip().splitlines()[-1]
    by_user = pagemind(tmp_path, "keys", "revoke", "--user", "u9")
    assert by_user.returncode == 0 and by_user.stdout.count("revoked") == 2
    assert keys_of(tmp_path).find(first) is None and keys_of(tmp_path).find(second) is None
    assert keys_of(tmp_path).find(admin_key) is not None


def test_bad_key_commands_are_one_clear_line(tmp_path):
    for args, says in (
        (("keys", "create"), "needs the user"),
        (("keys", "create", "--user", "a b"), "user id"),
        (("keys", "revoke"), "usage"),
        (("keys", "revoke", "key_000000000000"), "no live key"),
        (("agents", "assign", "nobody", "--user", "u1"), "no agent is called"),
        (("agents", "assign", "nobody"), "usage"),
    ):
        result = pagemind(tmp_path, *args)
        assert result.returncode == 2, args
        assert says in result.stderr and len(result.stderr.strip().splitlines()) == 1, (args, result.stderr)


def test_agents_assign_gives_a_stored_agent_to_a_user(tmp_path):
    pagemind(tmp_path, "keys", "list")  # makes the database
    store = StateStore.open(f"sqlite:///{tmp_path / 'home' / 'pagemind.db'}")
    store.ensure_agent(build_spec(name="companion-u1"))
    result = pagemind(tmp_path, "agents", "assign", "companion-u1", "--user", "u1")
    assert result.returncode == 0, result.stderr
    assert keys_of(tmp_path).owner_of("companion-u1") == "u1"
    assert "owner u1" in pagemind(tmp_path, "agents").stdout
    assert pagemind(tmp_path, "agents", "assign", "companion-u1", "--user", "").returncode == 0
    assert keys_of(tmp_path).owner_of("companion-u1") is None


def test_purge_a_user_erases_their_agents_and_keys_and_nothing_else(tmp_path):
    for name in ("companion", "assistant"):
        made = pagemind(tmp_path, "context", f"agents/{name}.yaml")
        assert made.returncode == 0, made.stderr
    assert pagemind(tmp_path, "agents", "assign", "companion", "--user", "u7").returncode == 0
    key = pagemind(tmp_path, "keys", "create", "--user", "u7").stdout.strip().splitlines()[-1]
    other = pagemind(tmp_path, "keys", "create", "--user", "u8").stdout.strip().splitlines()[-1]
    erased = pagemind(tmp_path, "agents", "purge", "--user", "u7")
    assert erased.returncode == 0, erased.stderr
    assert erased.stdout.startswith("purged 'companion': ")
    assert erased.stdout.strip().endswith("erased user u7: 1 agent(s) purged, 1 key(s) deleted")
    listed = pagemind(tmp_path, "agents")
    assert "companion" not in listed.stdout and "assistant" in listed.stdout
    keys = keys_of(tmp_path)
    assert keys.find(key) is None and keys.find(other) is not None
    assert "u7" not in pagemind(tmp_path, "keys", "list").stdout
    usage = pagemind(tmp_path, "agents", "purge", "assistant", "--user", "u8")
    assert usage.returncode == 2 and "usage" in usage.stderr
