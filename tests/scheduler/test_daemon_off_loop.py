"""The daemon's event loop never waits on a database round trip of a turn: on Postgres every statement a turn's
store calls run (accepting the message, committing steps, a flush's eviction, the pressure flags, an idempotency
key's lookup) is awaited or runs in a worker thread, so one agent's commit never stalls the other agents' turns that
share the loop. (SQLite's statements are in-process work and run inline: `runtime/state/off_loop.py` says why.)"""

from __future__ import annotations

import contextvars
import threading
from pathlib import Path

import pytest
from sqlalchemy import event
from sqlalchemy.engine import Engine

from pagemind.scheduler import message_turn
from tests.scheduler.test_daemon_core import make_daemon
from tests.support.daemon_support import ledger_model, write_agents

IN_TURN: contextvars.ContextVar[bool] = contextvars.ContextVar("in_turn", default=False)


@pytest.fixture
def statements_on_the_loop(monkeypatch):
    """The statements a turn's task executed on the event loop's own thread."""
    loop_thread = threading.get_ident()
    found: list[str] = []
    original = message_turn.run_turn

    async def marked_turn(*args, **kwargs):
        marked = IN_TURN.set(True)  # asyncio.to_thread copies the context, hence the thread check below
        try:
            return await original(*args, **kwargs)
        finally:
            IN_TURN.reset(marked)

    def seen(conn, cursor, statement, params, context, executemany) -> None:
        if IN_TURN.get() and threading.get_ident() == loop_thread:
            found.append(" ".join(statement.split())[:120])

    monkeypatch.setattr(message_turn, "run_turn", marked_turn)
    event.listen(Engine, "before_cursor_execute", seen)
    yield found
    event.remove(Engine, "before_cursor_execute", seen)


async def test_turns_through_a_flush_run_no_statement_on_the_event_loop(database_url, tmp_path, statements_on_the_loop):
    if database_url.startswith("sqlite"):
        pytest.skip("SQLite runs a turn's statements inline (runtime/state/off_loop.py)")
    folder: Path = write_agents(tmp_path / "agents", context_window=3000)
    daemon = make_daemon(database_url, folder, ledger_model())
    await daemon.start()
    try:
        for number in range(30):
            item = await daemon.submit("alice", f"msg {number} " + "about the garden and the beans " * 10)
            assert (await daemon.wait(item.run_id, timeout=30)).state == "done"
        async with daemon.agent("alice") as agent:
            flushed = agent.window.store.summaries(agent.record.id)
    finally:
        await daemon.stop()
    assert flushed, "the turns should have filled the window and flushed it"
    assert statements_on_the_loop == []
