"""The reply printed as it is written (issue 12 follow-up): `run` and `chat` on a terminal stream the reply's tokens
(ScriptedOpenAI answers `stream: true` in pieces); piped, they print exactly what they printed before and make plain
requests; `send --server` on a terminal reads the daemon's event stream (the daemon test app of
tests/scheduler/api/test_api_stream.py) and prints the deltas, a `reply_reset` as a `(draft discarded)` line, the final reply last."""

from __future__ import annotations

import argparse
import io
from pathlib import Path

from pagemind.runtime.cli.live_reply import RESET_MARKER, LiveReply
from pagemind.runtime.cli.main import main
from pagemind.runtime.testing.responses import call, tool_call_body, tool_calls_body
from pagemind.scheduler import cli as scheduler_cli
from pagemind.scheduler.api.client import DaemonClient
from tests.runtime.trace.test_trace_cli import home  # noqa: F401 — the fixture: a fresh PAGEMIND_HOME, mocked endpoint
from tests.scheduler.api.test_api import create
from tests.scheduler.api.test_api_stream import daemon_with  # noqa: F401 — the fixture

COMPANION = str(Path(__file__).parents[3] / "agents" / "companion.yaml")
USER_TEXT = "Hi, I'm Lin. I'm allergic to peanuts."
REPLY = "Nice to meet you, Lin."
NOTE = "Let me note that."


class Terminal(io.StringIO):
    """A stdout that says it is a terminal and keeps each write apart (to see the pieces arrive)."""

    def __init__(self) -> None:
        super().__init__()
        self.writes: list[str] = []

    def isatty(self) -> bool:
        return True

    def write(self, text: str) -> int:
        self.writes.append(text)
        return super().write(text)


def script_turn(scripted_openai) -> None:
    """A note before a tool call (streamed, then reset), then the reply through send_message."""
    scripted_openai.add(
        tool_calls_body(
            call("core_memory_append", {"label": "human", "content": "Lin, allergic to peanuts"}), content=NOTE
        ),
        tool_call_body("send_message", {"message": REPLY}),
    )


def test_run_on_a_terminal_prints_the_tokens_as_they_arrive(home, scripted_openai, monkeypatch):
    script_turn(scripted_openai)
    terminal = Terminal()
    monkeypatch.setattr("sys.stdout", terminal)
    assert main(["run", COMPANION, "-m", USER_TEXT]) == 0
    assert terminal.getvalue() == f"{NOTE}\n{RESET_MARKER}\n{REPLY}\n"
    # the reply came in pieces (ScriptedOpenAI streams 3 characters a chunk), the line's end after them
    reply_pieces = terminal.writes[terminal.writes.index(f"\n{RESET_MARKER}\n") + 1 :]
    assert len(reply_pieces) > 3 and "".join(reply_pieces) == f"{REPLY}\n" and reply_pieces[-1] == "\n"
    assert all(r.get("stream") is True for r in scripted_openai.requests)


def test_run_piped_prints_what_it_always_did_and_does_not_stream(home, scripted_openai, capsys):
    script_turn(scripted_openai)
    assert main(["run", COMPANION, "-m", USER_TEXT]) == 0
    assert capsys.readouterr().out == f"{REPLY}\n"
    assert not any("stream" in r for r in scripted_openai.requests)


def test_chat_on_a_terminal_streams_each_reply_after_the_agent_prompt(home, scripted_openai, monkeypatch):
    script_turn(scripted_openai)
    terminal = Terminal()
    monkeypatch.setattr("sys.stdout", terminal)
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(f"{USER_TEXT}\n/quit\n".encode())))
    assert main(["chat", COMPANION]) == 0
    assert terminal.getvalue() == (
        f"Chatting with companion. Ctrl-D or /quit to leave.\nyou> companion> {NOTE}\n"
        f"{RESET_MARKER}\ncompanion> {REPLY}\nyou> "
    )
    assert terminal.writes.count("companion> ") == 2 and REPLY not in terminal.writes


def test_chat_piped_is_unchanged(home, scripted_openai, monkeypatch, capsys):
    script_turn(scripted_openai)
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(f"{USER_TEXT}\n".encode())))
    assert main(["chat", COMPANION]) == 0
    assert capsys.readouterr().out == (
        f"Chatting with companion. Ctrl-D or /quit to leave.\nyou> companion> {REPLY}\nyou> "
    )
    assert not any("stream" in r for r in scripted_openai.requests)


def test_the_final_reply_wins_over_what_was_streamed():
    terminal = Terminal()
    live = LiveReply("a> ", stream=terminal)
    live.delta("Hel")
    live.delta("lo")
    live.finish("Hello!")
    live.delta("same")
    live.finish("same")
    live.finish("(no reply)")
    assert terminal.getvalue() == "a> Hello\na> Hello!\na> same\na> (no reply)\n"


async def send_on_terminal(client, monkeypatch, text: str) -> tuple[int, Terminal]:
    """`pagemind send companion-u1 TEXT --server …` with stdout a terminal, against the daemon test app."""
    transport = client._transport  # the app's ASGI transport, in this event loop
    monkeypatch.setattr(scheduler_cli, "_client", lambda url: DaemonClient(url, async_transport=transport))
    terminal = Terminal()
    monkeypatch.setattr("sys.stdout", terminal)
    args = argparse.Namespace(agent="companion-u1", text=text, server="http://test", key=None, timeout=30.0)
    code = await scheduler_cli.cmd_send(args, None)
    return code, terminal


async def test_send_on_a_terminal_prints_the_streamed_reply(daemon_with, monkeypatch):  # noqa: F811
    client, provider = await daemon_with()
    await create(client)
    code, terminal = await send_on_terminal(client, monkeypatch, "hello there")
    assert code == 0
    assert terminal.getvalue() == "echo: hello there\n"
    assert len(terminal.writes) > 3 and terminal.writes[-1] == "\n"  # the pieces, then the line's end
    assert [r.get("stream") for r in provider.requests] == [True, True]


async def test_send_on_a_terminal_shows_a_reset_and_the_retried_reply(daemon_with, monkeypatch):  # noqa: F811
    client, provider = await daemon_with(cut=1)
    await create(client)
    code, terminal = await send_on_terminal(client, monkeypatch, "a long enough message")
    assert code == 0
    printed = terminal.getvalue()
    before, after = printed.split(f"\n{RESET_MARKER}\n")
    assert before and "echo: a long enough message".startswith(before)
    assert after == "echo: a long enough message\n"
    assert len(provider.requests) == 3


async def test_send_piped_uses_the_synchronous_route_and_prints_as_before(monkeypatch, capsys):
    class Synchronous:
        """A client with only the synchronous route: streaming would fail the test."""

        def __enter__(self):
            return self

        def __exit__(self, *_):
            pass

        def send(self, agent, text, *, idempotency_key, timeout_s):
            return {"state": "done", "reply": f"echo: {text}", "run_id": "r1"}

    monkeypatch.setattr(scheduler_cli, "_client", lambda url: Synchronous())
    args = argparse.Namespace(agent="companion-u1", text="hi", server="http://test", key=None, timeout=30.0)
    assert await scheduler_cli.cmd_send(args, None) == 0
    assert capsys.readouterr().out == "echo: hi\n"
