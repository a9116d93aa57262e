"""The memory page's review queue and forget sections over plain HTTP (httpx against the app in process, a real
daemon with the scripted model, on SQLite and PostgreSQL): pending memories listed and escaped, a note where review
is off; approve, approve and pin, edit and approve, reject — each the API's decision, refused without the page's
CSRF token or from another site, and out of reach of another user's key; forget with its confirm box and a report
of counts that never repeats what went; mute and unmute."""

from __future__ import annotations

import httpx
import pytest

from tests.scheduler.api.test_api import KEEPER, TEMPLATE, scripted
from tests.scheduler.ui.test_ui_http import CSRF, HOSTILE, TOKEN, sign_in
from tests.support.asgi_daemon import asgi_daemon

REVIEWER = KEEPER.replace("name: keeper", "name: reviewer\ntemplate: true") + "memory: {review: required}\n"
CANARY = "QUILLFEATHER-4417"
PENDING = [
    "Lin likes green tea in the morning",
    "Lin's sister Mei lives in Lisbon",
    "Lin runs on Tuesdays",
    "Lin's bank PIN is 9090",
    f"Lin wrote {HOSTILE}",
]


@pytest.fixture
async def site(tmp_path, database_url):
    """(client, daemon, keys, held): alice owns `notes-r` (review required, memories held for review: `held`, their
    ids in PENDING's order) and `notes-k` (review off); bob owns `notes-b`; carol `pal-c` (no archival memory)."""
    files = {
        "companion.yaml": TEMPLATE,
        "keeper.yaml": KEEPER.replace("name: keeper", "name: keeper\ntemplate: true"),
        "reviewer.yaml": REVIEWER,
    }
    users = ("alice", "bob", "carol")
    async with asgi_daemon(tmp_path, database_url, files, scripted(), token=TOKEN, users=users) as served:
        client, daemon, admin = served.client, served.daemon, {"authorization": f"Bearer {TOKEN}"}
        for name, owner, template in (
            ("notes-r", "alice", "reviewer"),
            ("notes-k", "alice", "keeper"),
            ("notes-b", "bob", "reviewer"),
            ("pal-c", "carol", "companion"),
        ):
            made = await client.post(
                "/v1/agents", json={"template": template, "name": name, "owner": owner}, headers=admin
            )
            assert made.status_code == 201, made.text
        async with daemon.agent("notes-r") as agent:
            assert agent.review_queue is not None and agent.review_queue.holds("extraction")
            held = [await agent.review_queue.hold("extraction", text, tags=["lin"]) for text in PENDING]
        yield client, daemon, served.keys, held


def api(key: str) -> dict[str, str]:
    return {"authorization": f"Bearer {key}"}


async def waiting(client: httpx.AsyncClient, key: str, agent: str = "notes-r") -> list[str]:
    listed = await client.get(f"/v1/agents/{agent}/memory/review", headers=api(key))
    assert listed.status_code == 200, listed.text
    return [p["text"] for p in listed.json()["pending"]]


async def remembered(client: httpx.AsyncClient, key: str, agent: str = "notes-r") -> dict[str, list[str]]:
    listed = await client.get(f"/v1/agents/{agent}/memory/archival", headers=api(key))
    assert listed.status_code == 200, listed.text
    return {m["text"]: m["tags"] for m in listed.json()["memories"]}


async def test_the_review_queue_lists_what_waits_escaped_and_says_when_review_is_off(site):
    client, _, keys, held = site
    await sign_in(client, keys["alice"])
    html = (await client.get("/ui/agents/notes-r")).text
    review = html[html.index('<section id="review">') : html.index('<section id="archival">')]
    assert "Held for review" in review and "extraction, reflection" in review
    for text, review_id in zip(PENDING[:-1], held, strict=False):
        assert text.replace("'", "&#39;") in review and f'id="review-{review_id}"' in review
        assert f'action="/ui/agents/notes-r/review/{review_id}/approve"' in review
        assert f'action="/ui/agents/notes-r/review/{review_id}/reject"' in review
    assert "<script" not in html and "<img" not in html and "&lt;script&gt;document.title=" in review
    assert review.count('name="csrf"') == 2 * len(PENDING) and 'name="pin" value="1"' in review
    assert "0 live memories" in html  # held, not remembered
    off = (await client.get("/ui/agents/notes-k")).text
    assert "Review is off for this agent" in off and "Nothing waits for review" in off
    await sign_in(client, keys["carol"])
    assert "has no archival memory, so nothing of it waits for review" in (await client.get("/ui/agents/pal-c")).text


async def test_approve_pin_edit_and_reject_from_the_page(site):
    client, _, keys, held = site
    token = await sign_in(client, keys["alice"])
    tea, sister, runs, pin, _ = held
    base = "/ui/agents/notes-r/review"
    done = await client.post(f"{base}/{tea}/approve", data={"csrf": token, "text": PENDING[0]})
    assert done.status_code == 303 and done.headers["location"] == "/ui/agents/notes-r?done=approved#review"
    assert "Approved: the memory is now in archival memory." in (await client.get(done.headers["location"])).text
    pinned = await client.post(f"{base}/{sister}/approve", data={"csrf": token, "text": PENDING[1], "pin": "1"})
    assert pinned.status_code == 303 and pinned.headers["location"].endswith("?done=pinned#review")
    edited = await client.post(f"{base}/{runs}/approve", data={"csrf": token, "text": "Lin runs on\r\nThursdays"})
    assert edited.status_code == 303
    rejected = await client.post(f"{base}/{pin}/reject", data={"csrf": token})
    assert rejected.status_code == 303 and rejected.headers["location"].endswith("?done=rejected#review")
    kept = await remembered(client, keys["alice"])
    assert set(kept) == {PENDING[0], PENDING[1], "Lin runs on Thursdays"}  # the edit, as approved
    assert "pinned" in kept[PENDING[1]] and "pinned" not in kept[PENDING[0]]
    assert await waiting(client, keys["alice"]) == [PENDING[4]]
    hits = await client.get(
        "/v1/agents/notes-r/memory/archival/search", params={"q": "sister Mei"}, headers=api(keys["alice"])
    )
    assert PENDING[1] in [h["text"] for h in hits.json()]
    html = (await client.get("/ui/agents/notes-r")).text
    assert "9090" not in html and "3 live memories" in html
    gone = await client.post(f"{base}/{pin}/approve", data={"csrf": token, "text": "x"})
    assert gone.status_code == 404 and "unknown_review" in gone.text


async def test_a_refused_approval_keeps_the_text_and_says_why(site):
    client, _, keys, held = site
    token = await sign_in(client, keys["alice"])
    hostile = held[4]
    for text, why in (("   ", "the memory is empty"), ("y" * 4001, "at most 4000 characters")):
        refused = await client.post(f"/ui/agents/notes-r/review/{hostile}/approve", data={"csrf": token, "text": text})
        assert refused.status_code == 422 and why in refused.text
        item = refused.text[refused.text.index(f'id="review-{hostile}"') :].split("</article>")[0]
        assert 'class="error"' in item and text.strip() in item
    assert len(await waiting(client, keys["alice"])) == len(PENDING)
    assert await remembered(client, keys["alice"]) == {}


async def test_the_review_forms_need_the_token_and_the_owners_key(site):
    client, _, keys, held = site
    token = await sign_in(client, keys["alice"])
    tea = held[0]
    stale = await client.post(f"/ui/agents/notes-r/review/{tea}/approve", data={"csrf": "forged", "text": PENDING[0]})
    foreign = await client.post(
        f"/ui/agents/notes-r/review/{tea}/reject", data={"csrf": token}, headers={"origin": "https://evil.test"}
    )
    assert stale.status_code == foreign.status_code == 403
    bob = await sign_in(client, keys["bob"])
    for path, data in (
        (f"/ui/agents/notes-r/review/{tea}/approve", {"csrf": bob, "text": PENDING[0]}),
        (f"/ui/agents/notes-r/review/{tea}/reject", {"csrf": bob}),
        ("/ui/agents/notes-r/forget", {"csrf": bob, "query": "green tea", "confirm": "yes"}),
        ("/ui/agents/notes-r/mute", {"csrf": bob, "topic": "tea"}),
    ):
        answer = await client.post(path, data=data)
        assert answer.status_code == 404 and "notes-r" in answer.text and "green tea" not in answer.text, path
    assert len(await waiting(client, keys["alice"])) == len(PENDING)
    muted = await client.get("/v1/agents/notes-r/memory/muted", headers=api(keys["alice"]))
    assert muted.json()["topics"] == []


async def test_forget_from_the_page_confirms_then_reports_counts_only(site):
    client, _, keys, _ = site
    token = await sign_in(client, keys["alice"])
    alice = api(keys["alice"])
    sent = await client.post(
        "/v1/agents/notes-k/messages", json={"content": f"my locker code is {CANARY}"}, headers=alice
    )
    assert sent.status_code == 200, sent.text
    stored = await client.post(
        "/v1/agents/notes-k/memory/archival", json={"content": f"Lin's locker code is {CANARY}"}, headers=alice
    )
    assert stored.status_code == 201
    await client.post("/v1/agents/notes-k/memory/archival", json={"content": "Lin likes green tea"}, headers=alice)
    assert CANARY in (await client.get("/ui/agents/notes-k")).text  # in the block, the turns, archival memory

    unconfirmed = await client.post("/ui/agents/notes-k/forget", data={"csrf": token, "query": "locker code"})
    assert unconfirmed.status_code == 400 and "to confirm" in unconfirmed.text
    assert 'value="locker code"' in unconfirmed.text and CANARY in unconfirmed.text  # nothing forgotten yet
    stale = await client.post("/ui/agents/notes-k/forget", data={"csrf": "x", "query": "locker code", "confirm": "yes"})
    assert stale.status_code == 403 and CANARY in (await client.get("/ui/agents/notes-k")).text

    done = await client.post(
        "/ui/agents/notes-k/forget", data={"csrf": token, "query": "locker code", "confirm": "yes"}
    )
    assert done.status_code == 200, done.text
    report = done.text[done.text.index('class="report"') :].split("</div>")[0]
    assert 'archival memories deleted</td><td class="num">1<' in report
    assert 'core memory lines removed</td><td class="num">1 (human: 1)<' in report
    assert "messages replaced by a tombstone" in report
    assert CANARY not in done.text and "locker code" not in done.text  # neither what went nor the query
    assert CANARY not in (await client.get("/v1/agents/notes-k/memory", headers=alice)).text
    assert list(await remembered(client, keys["alice"], "notes-k")) == ["Lin likes green tea"]


async def test_a_refused_forget_keeps_the_query_escaped(site):
    client, _, keys, _ = site
    token = await sign_in(client, keys["alice"])
    for query, status, why in ((" ", 422, "say what to forget"), ("y" * 501, 422, "at most 500 characters")):
        refused = await client.post("/ui/agents/notes-k/forget", data={"csrf": token, "query": query, "confirm": "yes"})
        assert refused.status_code == status and why in refused.text, refused.text
    hostile = await client.post("/ui/agents/notes-k/forget", data={"csrf": token, "query": HOSTILE})
    assert hostile.status_code == 400 and "<script" not in hostile.text and "&lt;script&gt;" in hostile.text


async def test_mute_and_unmute_from_the_page(site):
    client, _, keys, _ = site
    token = await sign_in(client, keys["alice"])
    muted = await client.post("/ui/agents/notes-r/mute", data={"csrf": token, "topic": HOSTILE})
    assert muted.status_code == 303 and muted.headers["location"] == "/ui/agents/notes-r?done=muted#forget"
    html = (await client.get(muted.headers["location"])).text
    topics = html[html.index('class="topics"') :].split("</ul>")[0]
    assert "<script" not in html and "&lt;script&gt;" in topics and 'action="/ui/agents/notes-r/unmute"' in topics
    assert "Muted: whatever touches the topic" in html
    again = await client.post("/ui/agents/notes-r/mute", data={"csrf": token, "topic": HOSTILE})
    assert again.headers["location"].endswith("?done=already-muted#forget")
    listed = await client.get("/v1/agents/notes-r/memory/muted", headers=api(keys["alice"]))
    assert listed.json()["topics"] == [" ".join(HOSTILE.split())]
    stale = await client.post("/ui/agents/notes-r/unmute", data={"csrf": "x", "topic": HOSTILE})
    assert stale.status_code == 403
    unmuted = await client.post("/ui/agents/notes-r/unmute", data={"csrf": token, "topic": HOSTILE})
    assert unmuted.status_code == 303 and unmuted.headers["location"].endswith("?done=unmuted#forget")
    assert (await client.get("/v1/agents/notes-r/memory/muted", headers=api(keys["alice"]))).json()["topics"] == []
    nothing = await client.post("/ui/agents/notes-r/unmute", data={"csrf": token, "topic": "never muted"})
    assert nothing.headers["location"].endswith("?done=not-muted#forget")
    too_long = await client.post("/ui/agents/notes-r/mute", data={"csrf": token, "topic": "z" * 201})
    assert too_long.status_code == 422 and "at most 200 characters" in too_long.text and "z" * 201 in too_long.text
    assert CSRF.search(too_long.text)  # the page again, with its forms
