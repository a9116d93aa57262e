"""The memory page in a real Chromium (Playwright), against `pagemind serve` as a user runs it (a process on a
free port, the scripted model endpoint of tests/support/openai_stub.py, keys made with `pagemind keys create`):
sign in with a user key, the agent's blocks show, the archival search shows its hits, hostile memories stay text,
an edit made in the page shows in `pagemind memory AGENT` (the CLI of this environment), and another user's key
sees neither the agent nor its page. Screenshots are taken on the way; with PAGEMIND_TEST_SCREENSHOTS naming a
folder they are copied there (how docs/pages/guide/images/ was made).

The browser: Debian's `chromium` (/usr/bin/chromium, which .ci/run installs), else one on PATH, else Playwright's
own download. The test skips, saying why, only where there is none (or no `playwright` package)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from tests.scheduler.test_serve import environment, pagemind, start_serve, stop, stub  # noqa: F401 - fixtures
from tests.support.openai_stub import REMEMBER

KEEPER = """
name: keeper
template: true
model: {name: gpt-4o-mini, context_window: 8192, max_output_tokens: 256, request_timeout_s: 10}
system: You keep notes about the person you talk with.
blocks:
  - {label: persona, value: "I keep careful notes.", limit: 200, description: "who the agent is"}
  - {label: human, value: "", limit: 200, description: "what the agent knows of its user"}
tools: [send_message, memory_rethink, archival_memory_insert, archival_search, conversation_search]
memory:
  review: {extraction: required, reflection: required, archival_memory_insert: required}
"""
HOSTILE = '<img src=x onerror="document.title=\'pwned\'"><script>document.title="pwned"</script>'
MEMORIES = [
    "Lin likes green tea in the morning, never coffee",
    "Lin's sister Mei lives in Lisbon and visits in June",
    "Lin is training for the Berlin half marathon in April",
    f"Lin pasted this into the chat: {HOSTILE}",
]
PROPOSED = "Lin's favourite bakery is Padaria Aurora on Rua Augusta"  # the model saves it: held for review
CANARY = "Lin's locker code is LOCKER-7731"  # a core memory line, forgotten from the page
KEPT = "Lin runs most mornings\nand drinks green tea"
EDITED = f"{KEPT}\n{CANARY}"


def chromium() -> str | None:
    """A Chromium to drive: Debian's, one on PATH, or Playwright's own (None: none to be had)."""
    for found in ("/usr/bin/chromium", shutil.which("chromium"), shutil.which("chromium-browser")):
        if found and Path(found).exists():
            return found
    try:
        from playwright.sync_api import sync_playwright

        with sync_playwright() as p:
            own = p.chromium.executable_path
    except Exception:  # no playwright, or no driver for it: no browser either
        return None
    return own if Path(own).exists() else None


def make_key(env: dict, *args: str) -> str:
    made = pagemind(env, "keys", "create", *args)
    assert made.returncode == 0, made.stderr
    return made.stdout.strip().splitlines()[-1]


@pytest.fixture
def served(environment):  # noqa: F811 - the fixture imported above
    """(url, env, keys, stop): `pagemind serve` over a folder with the keeper template; alice's agent `notes-lin`
    has had a turn, holds archival memories, and has one waiting for review (the model saved it); `stop()` stops
    the daemon before the test ends."""
    folder, env = environment
    (folder / "keeper.yaml").write_text(KEEPER)
    keys = {"alice": make_key(env, "--user", "alice"), "bob": make_key(env, "--user", "bob")}
    process, url = start_serve(folder, env)
    stopped: list[tuple[int, str]] = []  # (exit code, stderr) once stopped: by the test, else here

    def halt() -> None:
        if not stopped:
            stopped.append(stop(process))

    try:
        alice = {"authorization": f"Bearer {keys['alice']}"}
        made = httpx.post(f"{url}/v1/agents", json={"template": "keeper", "name": "notes-lin"}, headers=alice)
        assert made.status_code == 201, made.text
        sent = httpx.post(
            f"{url}/v1/agents/notes-lin/messages",
            json={"content": "I'm Lin, I run most mornings"},
            headers=alice,
            timeout=60,
        )
        assert sent.status_code == 200, sent.text
        proposed = httpx.post(
            f"{url}/v1/agents/notes-lin/messages",
            json={"content": f"{REMEMBER}{PROPOSED}"},  # the stub model answers with archival_memory_insert
            headers=alice,
            timeout=60,
        )
        assert proposed.status_code == 200, proposed.text
        for text in MEMORIES:
            stored = httpx.post(
                f"{url}/v1/agents/notes-lin/memory/archival", json={"content": text}, headers=alice, timeout=60
            )
            assert stored.status_code == 201, stored.text
        yield url, env, keys, halt
    finally:
        code, stderr = (stopped or [stop(process)])[0]
    assert code == 0, stderr


def test_the_memory_page_in_chromium(served, tmp_path):
    executable = chromium()
    if executable is None:
        pytest.skip("no Chromium to drive: `apt-get install chromium` (Debian) or `playwright install chromium`")
    from playwright.sync_api import expect, sync_playwright

    url, env, keys, stop_serve = served
    shots = tmp_path / "shots"
    shots.mkdir()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable)
        try:
            page = browser.new_page(viewport={"width": 1200, "height": 1000})
            dialogs: list[str] = []
            page.on("dialog", lambda dialog: (dialogs.append(dialog.message), dialog.dismiss()))
            page.goto(f"{url}/ui")
            expect(page).to_have_url(f"{url}/ui/login")
            page.fill("#key", keys["alice"])
            page.click("form.login button")
            expect(page).to_have_url(f"{url}/ui")
            page.click("text=notes-lin")
            expect(page).to_have_title("notes-lin · pagemind")  # a hostile memory would have set "pwned"
            expect(page.locator("#block-persona")).to_contain_text("/200 chars")
            expect(page.locator("#block-persona textarea")).to_have_value("I keep careful notes.")
            expect(page.locator("#turns")).to_contain_text("memory_rethink")
            expect(page.locator("#archival")).to_contain_text(HOSTILE)  # shown as the text it is
            assert page.locator("#archival img").count() == 0 and dialogs == []
            page.screenshot(path=shots / "memory-page.png")

            page.fill("input[name=q]", "green tea")
            page.click("form.search button")
            expect(page.locator("ol.hits li").first).to_contain_text("Lin likes green tea")
            page.locator("#archival").screenshot(path=shots / "memory-page-search.png")

            page.fill("#block-human textarea", EDITED)
            page.click("#block-human button")
            expect(page.locator("#block-human .saved")).to_be_visible()
            expect(page.locator("#block-human textarea")).to_have_value(EDITED)

            review = page.locator("#review")  # what the model saved waits for review, out of archival memory
            expect(review.locator("article.pending")).to_have_count(1)
            expect(review.locator("article.pending textarea")).to_have_value(PROPOSED)
            expect(page.locator("#archival ol.memories").last).not_to_contain_text("Padaria Aurora")
            review.screenshot(path=shots / "memory-page-review.png")
            review.locator("article.pending button", has_text="Approve and pin").click()
            expect(page.locator("#review .saved")).to_contain_text("Approved and pinned")
            expect(page.locator("#review")).to_contain_text("Nothing waits for review")
            expect(page.locator("#archival")).to_contain_text("Padaria Aurora")

            page.fill("#forget-query", "locker code")
            expect(page.locator("form.forget input[name=confirm]:invalid")).to_have_count(1)  # unticked: not sent
            page.check("form.forget input[name=confirm]")
            page.click("form.forget button")
            expect(page.locator("#forget .report")).to_contain_text("core memory lines removed")
            expect(page.locator("#block-human textarea")).to_have_value(KEPT)
            assert "LOCKER-7731" not in page.content() and "locker code" not in page.content()
            page.locator("#forget").screenshot(path=shots / "memory-page-forget.png")

            other = browser.new_context().new_page()
            other.goto(f"{url}/ui/login")
            other.fill("#key", keys["bob"])
            other.click("form.login button")
            expect(other.locator("main")).to_contain_text("No agent this key may see")
            other.goto(f"{url}/ui/agents/notes-lin")
            expect(other.locator("main")).to_contain_text("404")
            expect(other.locator("main")).not_to_contain_text("green tea")
        finally:
            browser.close()

    cli = Path(sys.executable).parent / "pagemind"  # the environment's own console script, as a user runs it
    shown = subprocess.run([str(cli), "memory", "notes-lin", "--history"], env=env, capture_output=True, text=True)
    assert shown.returncode == 0, shown.stderr
    assert "Lin runs most mornings\n  and drinks green tea" in shown.stdout
    assert "human ui:" in shown.stdout  # the page's edit, in the block's history
    assert "LOCKER-7731" not in shown.stdout  # forgotten from the page: from the block and its history
    listed = subprocess.run([str(cli), "memory", "archival", "notes-lin"], env=env, capture_output=True, text=True)
    assert listed.returncode == 0, listed.stderr
    assert PROPOSED in listed.stdout and "pinned" in listed.stdout  # approved (and pinned) in the page
    stop_serve()  # the daemon holds the archival store open: a search from the command line waits for it to go
    search = ["memory", "search", "notes-lin", "bakery Padaria Aurora", "--in", "archival"]
    found = subprocess.run([str(cli), *search], env=env, capture_output=True, text=True)
    assert found.returncode == 0, found.stderr
    assert PROPOSED in found.stdout and "LOCKER-7731" not in found.stdout
    for shot in shots.iterdir():
        assert shot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and shot.stat().st_size > 10_000
    if os.environ.get("PAGEMIND_TEST_SCREENSHOTS"):
        for shot in shots.iterdir():
            shutil.copy(shot, Path(os.environ["PAGEMIND_TEST_SCREENSHOTS"]) / shot.name)
