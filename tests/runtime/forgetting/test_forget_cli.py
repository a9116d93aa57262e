"""`pagemind memory forget AGENT --query`, `memory mute|unmute|muted AGENT`: what a user runs, in process."""

from __future__ import annotations

import asyncio

import pytest

from pagemind.runtime.cli.main import main
from pagemind.runtime.memory.vectors.stores import close_all
from tests.runtime.forgetting.support import completion, files_holding, load
from tests.support.model_server import model_server

CANARY = "CLICANARY"


@pytest.fixture(autouse=True)
def _key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "test-key")
    yield
    close_all()


def test_forget_by_query_mute_unmute_and_list_from_the_command_line(isolated_home, monkeypatch, capsys):
    database_url = f"sqlite:///{isolated_home / 'pagemind.db'}"
    monkeypatch.setenv("DATABASE_URL", database_url)

    async def chat(url: str) -> None:
        agent = await load(url, database_url, isolated_home, name="clerk")
        await agent.send(f"my bank is {CANARY} savings")
        agent.store.engine.dispose()

    with model_server(completion) as url:
        asyncio.run(chat(url))
    close_all()
    assert files_holding(isolated_home, CANARY)
    assert main(["memory", "forget", "clerk", "--query", "bank", "--yes"]) == 0
    said = capsys.readouterr().out
    assert "Removed: 1 archival memories" in said and "messages replaced by a tombstone" in said
    assert CANARY not in said and files_holding(isolated_home, CANARY) == []

    assert main(["memory", "mute", "clerk", "my ex Mark"]) == 0
    assert main(["memory", "mute", "clerk", "my ex Mark"]) == 0
    assert main(["memory", "muted", "clerk"]) == 0
    assert main(["memory", "unmute", "clerk", "MY EX MARK"]) == 0
    assert main(["memory", "muted", "clerk"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines == [
        "muted 'my ex Mark'",
        "'my ex Mark' was already muted",
        "1 muted topics of 'clerk':",
        "  my ex Mark",
        "unmuted 'MY EX MARK'",
        "0 muted topics of 'clerk'",
    ]
