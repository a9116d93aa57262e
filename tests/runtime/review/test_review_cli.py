"""`pagemind memory review AGENT` with its non-interactive flags: list, edit, reject, approve, pin."""

from __future__ import annotations

import asyncio

import pytest

from pagemind.runtime.cli.main import main
from pagemind.runtime.memory.vectors.stores import close_all
from tests.runtime.review.test_review import completion, load
from tests.support.model_server import model_server


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    yield
    close_all()


def test_review_from_the_command_line(isolated_home, monkeypatch, tmp_path, capsys):
    database_url = f"sqlite:///{isolated_home / 'pagemind.db'}"
    monkeypatch.setenv("DATABASE_URL", database_url)

    async def held(url: str) -> list[str]:
        agent = await load(url, database_url, isolated_home)
        await agent.send("I run on Tuesdays")
        await agent.send("my PIN is 4711")
        assert agent.review_queue is not None
        ids = [p.id for p in agent.review_queue.pending()]
        agent.store.engine.dispose()
        return ids

    with model_server(completion) as url:
        run, pin = asyncio.run(held(url))
    close_all()
    assert main(["memory", "review", "reviewed"]) == 0
    listing = capsys.readouterr().out
    assert listing.startswith("2 memories of 'reviewed' wait for review:") and "my PIN is 4711" in listing
    assert main(["memory", "review", "reviewed", "--edit", run[:8], "--text", "Sam runs every Tuesday"]) == 0
    assert main(["memory", "review", "reviewed", "--reject", pin[:8]]) == 0
    assert main(["memory", "review", "reviewed", "--pin", run[:8]]) == 0
    said = capsys.readouterr().out.splitlines()
    assert said[:2] == [f"edited {run[:8]}", f"rejected {pin[:8]}"] and said[2].endswith(", pinned")
    assert main(["memory", "review", "reviewed"]) == 0
    assert main(["memory", "archival", "reviewed"]) == 0
    out = capsys.readouterr().out
    assert "0 memories of 'reviewed' wait for review" in out and "Sam runs every Tuesday" in out and "pinned" in out
    assert "4711" not in out
    assert main(["memory", "review", "reviewed", "--approve", "nope"]) == 2
