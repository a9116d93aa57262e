"""The memory page over plain HTTP (httpx against the app in process, a real daemon with the scripted model, on
SQLite and PostgreSQL): the login cookie and its flags, what a user key may see (another user's agent answers the
unknown agent's page), every section of an agent's page, hostile memories shown as text, the archival search, and
the block edit form — versioned as the API's edits are, refused without its CSRF token or from another site."""

from __future__ import annotations

import re

import httpx
import pytest

from pagemind.runtime.process.settings import Settings
from pagemind.runtime.state.store import StateStore
from pagemind.scheduler.api.app import create_app
from pagemind.scheduler.api.ui.sections import SECTIONS, Section, add_section
from pagemind.scheduler.catalog import AgentCatalog
from pagemind.scheduler.daemon import Daemon
from tests.scheduler.api.test_api import KEEPER, TEMPLATE, scripted
from tests.support.asgi_daemon import asgi_daemon

TOKEN = "admin-token-for-ui-tests"
HOSTILE = '<script>document.title="pwned"</script><img src=x onerror="alert(1)">'
CSRF = re.compile(r'name="csrf" value="([^"]+)"')


@pytest.fixture
async def site(tmp_path, database_url):
    """(client, keyring, keys): the app over a started daemon; alice owns `notes-a` (a turn run, a hostile archival
    memory), bob owns `notes-b`, carol `pal-c` (a companion: a read-only block, no archival memory)."""
    files = {"companion.yaml": TEMPLATE, "keeper.yaml": KEEPER.replace("name: keeper", "name: keeper\ntemplate: true")}
    users = ("alice", "bob", "carol")
    async with asgi_daemon(tmp_path, database_url, files, scripted(), token=TOKEN, users=users) as served:
        client, admin = served.client, {"authorization": f"Bearer {TOKEN}"}
        for name, owner, template in (
            ("notes-a", "alice", "keeper"),
            ("notes-b", "bob", "keeper"),
            ("pal-c", "carol", "companion"),
        ):
            body = {"template": template, "name": name, "owner": owner}
            made = await client.post("/v1/agents", json=body, headers=admin)
            assert made.status_code == 201, made.text
        sent = await client.post("/v1/agents/notes-a/messages", json={"content": f"hi {HOSTILE}"}, headers=admin)
        assert sent.status_code == 200, sent.text
        for text in ("Lin likes green tea in the morning", f"Lin wrote {HOSTILE}"):
            stored = await client.post("/v1/agents/notes-a/memory/archival", json={"content": text}, headers=admin)
            assert stored.status_code == 201, stored.text
        yield client, served.keyring, {**served.keys, "admin": TOKEN}


async def sign_in(client: httpx.AsyncClient, key: str) -> str:
    """Log in through the form as a browser does; the page's CSRF token."""
    client.cookies.clear()
    form = await client.get("/ui/login")
    token = CSRF.search(form.text).group(1)
    answer = await client.post("/ui/login", data={"csrf": token, "key": key})
    assert answer.status_code == 303 and answer.headers["location"] == "/ui", answer.text
    return token


async def test_the_login_cookie_and_what_a_page_without_a_key_gets(site):
    client, _, keys = site
    for path in ("/ui", "/ui/agents/notes-a"):
        bare = await client.get(path)
        assert bare.status_code == 303 and bare.headers["location"] == "/ui/login"
    form = await client.get("/ui/login")
    assert form.status_code == 200 and "csrf" in form.headers["set-cookie"]
    token = CSRF.search(form.text).group(1)
    assert (await client.post("/ui/login", data={"key": keys["alice"]})).status_code == 403  # no token
    wrong = await client.post("/ui/login", data={"csrf": token, "key": "pm_" + "x" * 43})
    assert (
        wrong.status_code == 401
        and "wrong or revoked" in wrong.text
        and "pagemind_key" not in wrong.headers.get("set-cookie", "")
    )
    answer = await client.post("/ui/login", data={"csrf": token, "key": keys["alice"]})
    cookie = answer.headers["set-cookie"]
    assert answer.status_code == 303 and f"pagemind_key={keys['alice']}" in cookie
    assert {"httponly", "samesite=strict", "path=/ui"} <= {p.strip().lower() for p in cookie.split(";")}
    assert (await client.get("/ui")).status_code == 200
    assert (await client.get("/v1/agents")).status_code == 401  # the cookie is the page's, not the API's
    out = await client.post("/ui/logout", data={"csrf": token})
    assert out.status_code == 303 and (await client.get("/ui")).status_code == 303
    foreign = await client.post("/ui/login", data={"csrf": token, "key": keys["alice"]}, headers={"origin": "null"})
    assert foreign.status_code == 403 and "another site" in foreign.text


async def test_a_revoked_key_signs_the_browser_out(site):
    client, ring, keys = site
    await sign_in(client, keys["alice"])
    assert (await client.get("/ui/agents/notes-a")).status_code == 200
    [revoked] = ring.keys.revoke(keys["alice"])
    ring.forget({revoked.id})  # as a revocation through this process does
    gone = await client.get("/ui/agents/notes-a")
    assert gone.status_code == 303 and gone.headers["location"] == "/ui/login"


async def test_a_user_key_sees_its_own_agents_and_nobody_elses(site):
    client, _, keys = site
    await sign_in(client, keys["bob"])
    listed = await client.get("/ui")
    assert "notes-b" in listed.text and "notes-a" not in listed.text
    theirs, unknown = await client.get("/ui/agents/notes-a"), await client.get("/ui/agents/no-such-agent")
    assert theirs.status_code == unknown.status_code == 404
    assert theirs.text.replace("notes-a", "X") == unknown.text.replace("no-such-agent", "X")
    assert "green tea" not in theirs.text
    refused = await client.post("/ui/agents/notes-a/blocks/human", data={"csrf": "x", "value": "bob was here"})
    assert refused.status_code in (403, 404)
    await sign_in(client, keys["admin"])
    every = await client.get("/ui")
    assert "notes-a" in every.text and "notes-b" in every.text
    scripted_bearer = await client.get("/ui/agents/notes-b", headers={"authorization": f"Bearer {keys['bob']}"})
    assert scripted_bearer.status_code == 200  # a script may send the header instead of the cookie


async def test_the_agent_page_shows_every_section_and_escapes_what_memories_hold(site):
    client, _, keys = site
    await sign_in(client, keys["alice"])
    page = await client.get("/ui/agents/notes-a")
    assert page.status_code == 200, page.text
    assert "script-src" not in page.headers["content-security-policy"]  # default-src 'none': no script at all
    assert "default-src 'none'" in page.headers["content-security-policy"]
    assert page.headers["cache-control"] == "no-store"  # memories are private
    html = page.text
    for section in SECTIONS:
        assert f'<section id="{section.id}">' in html
    assert re.search(r"\d+/100 chars", html)  # the human block's size and limit
    assert "memory_rethink" in html and "send_message" in html  # the turn's tool calls
    assert "Lin likes green tea in the morning" in html and "2 live memories" in html
    assert 'class="warn"' in html and 'class="flush"' in html and "sec-messages" in html
    context = (
        await client.get("/v1/agents/notes-a/context", headers={"authorization": f"Bearer {keys['alice']}"})
    ).json()
    assert f"{context['tokens']} / {context['usable']} tokens" in html  # what `pagemind context` reports
    assert 'x1="70.0"' in html and 'x1="90.0"' in html  # the warn and flush lines of the default pressure
    assert "<script" not in html and "<img" not in html
    assert "&lt;script&gt;document.title=&#34;pwned&#34;&lt;/script&gt;" in html
    history = html[html.index('class="history"') :]
    assert "memory_rethink" in history  # the turn's edit, in the block's history


async def test_the_archival_search_lists_its_hits(site):
    client, _, keys = site
    await sign_in(client, keys["alice"])
    found = await client.get("/ui/agents/notes-a", params={"q": "green tea"})
    assert found.status_code == 200
    hits = found.text[found.text.index('class="memories hits"') :]
    assert "Found for “green tea”" in found.text and "Lin likes green tea" in hits.split("</ol>")[0]
    hostile = await client.get("/ui/agents/notes-a", params={"q": HOSTILE})
    assert "<script" not in hostile.text and "&lt;script&gt;" in hostile.text


async def test_an_edit_from_the_form_is_a_versioned_edit_and_needs_its_token(site):
    client, _, keys = site
    token = await sign_in(client, keys["alice"])
    api = {"authorization": f"Bearer {keys['alice']}"}
    before = (await client.get("/v1/agents/notes-a/memory", headers=api)).json()["blocks"][0]["value"]
    stale = await client.post("/ui/agents/notes-a/blocks/human", data={"csrf": "forged", "value": "x"})
    foreign = await client.post(
        "/ui/agents/notes-a/blocks/human", data={"csrf": token, "value": "x"}, headers={"origin": "https://evil.test"}
    )
    assert stale.status_code == foreign.status_code == 403
    assert (await client.get("/v1/agents/notes-a/memory", headers=api)).json()["blocks"][0]["value"] == before
    saved = await client.post("/ui/agents/notes-a/blocks/human", data={"csrf": token, "value": "Lin\r\nlikes tea"})
    assert saved.status_code == 303 and saved.headers["location"] == "/ui/agents/notes-a?saved=human#block-human"
    assert (await client.get("/v1/agents/notes-a/memory", headers=api)).json()["blocks"][0]["value"] == "Lin\nlikes tea"
    shown = await client.get(saved.headers["location"])
    assert "saved" in shown.text and "<td>ui</td>" in shown.text  # the history names the page's edits
    too_long = await client.post("/ui/agents/notes-a/blocks/human", data={"csrf": token, "value": "y" * 101})
    assert too_long.status_code == 422 and "at most 100 characters" in too_long.text and "y" * 101 in too_long.text
    unknown = await client.post("/ui/agents/notes-a/blocks/nope", data={"csrf": token, "value": "x"})
    assert unknown.status_code == 404 and "unknown_block" in unknown.text


async def test_a_read_only_block_has_no_form_and_an_agent_without_archival_says_so(site):
    client, _, keys = site
    token = await sign_in(client, keys["carol"])
    html = (await client.get("/ui/agents/pal-c")).text
    rules = html[html.index('id="block-rules"') :].split("</article>")[0]
    assert "read-only" in rules and "<form" not in rules and "Be kind." in rules
    assert "no archival memory" in html
    refused = await client.post("/ui/agents/pal-c/blocks/rules", data={"csrf": token, "value": "Be rude."})
    assert refused.status_code == 409 and "read-only" in refused.text


async def test_a_daemon_without_keys_shows_the_page_without_signing_in(tmp_path, sqlite_url):
    folder = tmp_path / "agents"
    folder.mkdir()
    (folder / "keeper.yaml").write_text(KEEPER)
    daemon = Daemon(
        AgentCatalog(folder, StateStore.open(sqlite_url)),
        Settings(home=tmp_path / "home", database_url=sqlite_url),
        model=scripted(),
    )
    await daemon.start()
    try:
        app = create_app(daemon, None)  # loopback only: nothing to check
        async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test") as client:
            login = await client.get("/ui/login")
            assert login.status_code == 303 and login.headers["location"] == "/ui"
            listed = await client.get("/ui")
            assert listed.status_code == 200 and "keeper" in listed.text and "Sign out" not in listed.text
            assert (await client.get("/ui/agents/keeper")).status_code == 200
    finally:
        await daemon.stop(5)


async def test_a_section_added_later_shows_on_the_page(site, monkeypatch):
    client, _, keys = site
    monkeypatch.setattr("pagemind.scheduler.api.ui.sections.SECTIONS", list(SECTIONS))

    async def count(agent, query):
        return agent.name

    from pagemind.scheduler.api.ui import sections

    add_section(Section("extra", "Extra", "sections/summary.html", count), before="archival")
    ids = [s.id for s in sections.SECTIONS]
    assert ids.index("extra") == ids.index("archival") - 1
    with pytest.raises(ValueError, match="already"):
        add_section(Section("extra", "Again", "sections/summary.html", count))
    await sign_in(client, keys["alice"])
    html = (await client.get("/ui/agents/notes-a")).text
    assert html.index('<section id="extra">') < html.index('<section id="archival">')
