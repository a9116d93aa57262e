"""Keys with `pagemind serve` as a user runs them: keys made by the CLI before the daemon starts are required by
it (no token needed, so it may bind beyond loopback), a user key drives its own agent over TCP and through
`pagemind send`, and another user's key gets the unknown agent's 404."""

from __future__ import annotations

import httpx

from tests.scheduler.test_serve import environment, pagemind, start_serve, stop, stub  # noqa: F401 - fixtures


def make_key(env: dict, *args: str) -> str:
    made = pagemind(env, "keys", "create", *args)
    assert made.returncode == 0, made.stderr
    return made.stdout.strip().splitlines()[-1]


def test_user_keys_over_tcp_without_a_token(environment):  # noqa: F811 - the fixture imported above
    folder, env = environment
    alice, bob = make_key(env, "--user", "alice"), make_key(env, "--user", "bob")
    admin = make_key(env, "--scope", "admin")
    process, url = start_serve(folder, env, "--host", "0.0.0.0")  # keys: a credential is required, any host
    try:
        assert httpx.get(f"{url}/v1/agents").status_code == 401
        as_alice = {"authorization": f"Bearer {alice}"}
        made = httpx.post(f"{url}/v1/agents", json={"template": "companion", "name": "c-alice"}, headers=as_alice)
        assert made.status_code == 201 and made.json()["owner"] == "alice"
        sent = pagemind({**env, "PAGEMIND_API_TOKEN": alice}, "send", "c-alice", "hello", "--server", url)
        assert sent.returncode == 0 and sent.stdout.strip() == "echo: hello", sent.stderr
        theirs = httpx.get(f"{url}/v1/agents/c-alice", headers={"authorization": f"Bearer {bob}"})
        unknown = httpx.get(f"{url}/v1/agents/c-nobody", headers={"authorization": f"Bearer {bob}"})
        assert theirs.status_code == unknown.status_code == 404
        assert theirs.json()["error"]["code"] == unknown.json()["error"]["code"] == "unknown_agent"
        as_admin = httpx.get(f"{url}/v1/agents", headers={"authorization": f"Bearer {admin}"})
        assert [a["name"] for a in as_admin.json()["agents"]] == ["c-alice"]
    finally:
        code, stderr = stop(process)
    assert code == 0, stderr
    assert "bearer token or API key required" in stderr
