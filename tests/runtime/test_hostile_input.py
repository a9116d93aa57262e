"""Hostile input: every failure is one clear line with the right exit code (0 ok, 1 model failure or replay
divergence, 2 bad input or configuration, 3 agent busy), never a traceback. Each case runs the real `pagemind`
command in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
COMPANION = str(ROOT / "agents" / "companion.yaml")
GOOD_MODEL = "model: {name: m, context_window: 4096, max_output_tokens: 256}\n"


@dataclass
class Case:
    """One hostile input: the command, its environment and files, and what the user must see."""

    argv: list[str | bytes]
    code: int
    says: str  # a fragment of the one-line error
    env: dict[str, str] = field(default_factory=dict)
    files: dict[str, bytes] = field(default_factory=dict)
    stdin: bytes = b""
    prepare: Callable[[Path], None] | None = None
    max_out: int | None = None  # at most this many bytes on stdout


def yaml_file(text: str | bytes) -> dict[str, bytes]:
    return {"agent.yaml": text if isinstance(text, bytes) else text.encode()}


def _database(tmp_path: Path) -> Path:
    """A real, checkpointed pagemind SQLite database under the case's PAGEMIND_HOME (no WAL beside it)."""
    import sqlite3

    from pagemind.runtime.state.engine import make_engine

    path = tmp_path / "home" / "pagemind.db"
    make_engine(f"sqlite:///{path}").dispose()
    connection = sqlite3.connect(path)
    connection.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    connection.execute("PRAGMA journal_mode=DELETE")
    connection.close()
    return path


def damaged_header(tmp_path: Path) -> None:
    path = _database(tmp_path)
    path.write_bytes(b"not a database!!" + path.read_bytes()[16:])


def truncated(tmp_path: Path) -> None:
    path = _database(tmp_path)
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 3])


def zero_bytes(tmp_path: Path) -> None:
    (tmp_path / "home").mkdir()
    (tmp_path / "home" / "pagemind.db").write_bytes(b"")


RECORDED = ROOT / "tests" / "traces" / "core_memory_turn.jsonl"


def _events() -> list[dict]:
    return [json.loads(line) for line in RECORDED.read_text().splitlines()]


def trace_file(edit: Callable[[list[dict]], list[dict]]) -> dict[str, bytes]:
    """The recorded core-memory turn, edited."""
    return {"bad.jsonl": ("\n".join(json.dumps(e) for e in edit(_events())) + "\n").encode()}


def _first(events: list[dict], kind: str, change: Callable[[dict], None], compact: bool | None = None) -> list[dict]:
    for event in events:
        if event["type"] == kind and (compact is None or event.get("compact") == compact):
            change(event)
            return events
    raise AssertionError(f"no {kind} event")


def _object_arguments(response: dict) -> None:
    response["body"]["choices"][0]["message"]["tool_calls"][0]["function"]["arguments"] = {"label": "human"}


def _huge_turn(events: list[dict]) -> list[dict]:
    return _first(events, "turn", lambda e: e.update(user_message="zebra " * 40_000))


TRACES: dict[str, Case] = {
    "replay binary file": Case(
        ["replay", "bad.jsonl"],
        2,
        "not a trace (binary data",
        files={"bad.jsonl": b"\x89PNG\r\n\x1a\n" + bytes(range(256)) * 20},
    ),
    "replay two headers": Case(
        ["replay", "bad.jsonl"], 2, "bad.jsonl:2: a second header", files=trace_file(lambda ev: [ev[0], *ev])
    ),
    "replay compact request without messages": Case(
        ["replay", "bad.jsonl"],
        2,
        "invalid compact request: its body has no `messages` list",
        files=trace_file(lambda ev: _first(ev, "model_request", lambda e: e["body"].pop("messages"), compact=True)),
    ),
    "replay odd response body": Case(
        ["replay", "bad.jsonl"],
        2,
        "invalid model_response body: `choices` must be a list",
        files=trace_file(lambda ev: _first(ev, "model_response", lambda e: e.update(body={"choices": "odd"}))),
    ),
    "trace show odd response body": Case(
        ["trace", "show", "bad.jsonl"],
        2,
        "invalid model_response body",
        files=trace_file(lambda ev: _first(ev, "model_response", lambda e: e["body"].update(choices=[{"message": 3}]))),
    ),
    "replay tool call event with object arguments": Case(
        ["replay", "bad.jsonl"],
        2,
        "tool_call.arguments: Input should be a valid string",
        files=trace_file(lambda ev: _first(ev, "tool_call", lambda e: e.update(arguments={"label": "human"}))),
    ),
    "replay response with object arguments": Case(
        ["replay", "bad.jsonl"],
        1,
        "DIVERGED",
        files=trace_file(lambda ev: _first(ev, "model_response", _object_arguments)),
    ),
    "trace show 200 KB message": Case(
        ["trace", "show", "bad.jsonl"],
        0,
        "238,000 more characters not shown",
        files=trace_file(_huge_turn),
        max_out=10_000,
    ),
}


CASES: dict[str, Case] = {
    **TRACES,
    "argument not utf-8": Case(["run", COMPANION, "-m", b"\xff\xfe hi"], 2, "argument 4 is not valid UTF-8"),
    "endpoint down names its url": Case(
        ["run", COMPANION, "-m", "hi"],
        1,
        "(endpoint http://127.0.0.1:9/v1/",
        env={"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": "x"},
    ),
    "memory search empty query": Case(["memory", "search", COMPANION, ""], 2, "the search query is empty"),
    "memory search blank query": Case(["memory", "search", COMPANION, "  "], 2, "the search query is empty"),
    "memory forget one-character prefix": Case(
        ["memory", "forget", COMPANION, "a", "--yes"], 2, "give at least 4 characters"
    ),
    "embedding dim abc": Case(
        ["agents"], 2, "PAGEMIND_EMBEDDING_DIM='abc' is not a whole number", env={"PAGEMIND_EMBEDDING_DIM": "abc"}
    ),
    "database url unparsable": Case(
        ["agents"], 2, "DATABASE_URL 'nonsense' is not a database URL", env={"DATABASE_URL": "nonsense"}
    ),
    "database url unknown scheme": Case(
        ["agents"], 2, "DATABASE_URL 'bogus://' is not a database URL", env={"DATABASE_URL": "bogus://"}
    ),
    "postgres nobody listens": Case(
        ["agents"],
        2,
        "cannot open database postgresql+psycopg://127.0.0.1:1/x",
        env={"DATABASE_URL": "postgresql://127.0.0.1:1/x"},
    ),
    "postgres database missing": Case(
        ["agents"],
        2,
        'database "pagemind_no_such_db" does not exist',
        env={"DATABASE_URL": "postgresql://127.0.0.1:5432/pagemind_no_such_db"},
    ),
    "postgres password not shown": Case(
        ["agents"],
        2,
        "postgresql+psycopg://someone:***@127.0.0.1:1/x",
        env={"DATABASE_URL": "postgresql://someone:hunter2@127.0.0.1:1/x"},
    ),
    "sqlite header damaged": Case(["agents"], 2, "file is not a database (the file is damaged", prepare=damaged_header),
    "sqlite truncated": Case(["memory", COMPANION], 2, "database disk image is malformed", prepare=truncated),
    "sqlite zero bytes": Case(["agents"], 2, "is empty (0 bytes), not a pagemind database", prepare=zero_bytes),
    "no model endpoint": Case(["run", COMPANION, "-m", "hi"], 2, "No model endpoint is configured"),
    "log level bogus": Case(
        ["agents"], 2, "PAGEMIND_LOG_LEVEL='bogus' is not a level", env={"PAGEMIND_LOG_LEVEL": "bogus"}
    ),
    "yaml duplicate key": Case(
        ["context", "agent.yaml"],
        2,
        "agent.yaml:2 name: duplicate key 'name'",
        files=yaml_file("name: a\nname: b\nsystem: hi\n" + GOOD_MODEL),
    ),
    "yaml not utf-8": Case(
        ["context", "agent.yaml"],
        2,
        "agent.yaml:2 not UTF-8 text",
        files=yaml_file(b"name: a\nsystem: h\xff\xfei\n" + GOOD_MODEL.encode()),
    ),
    "yaml nested 100000 deep": Case(
        ["context", "agent.yaml"], 2, "nested too deeply", files=yaml_file("a: " + "[" * 100_000 + "]" * 100_000 + "\n")
    ),
    "window not above output reserve": Case(
        ["context", "agent.yaml"],
        2,
        "agent.yaml:3 model.context_window: 256 leaves no room",
        files=yaml_file("name: a\nsystem: hi\nmodel: {name: m, context_window: 256, max_output_tokens: 256}\n"),
    ),
    "unknown encoding": Case(
        ["context", "agent.yaml"],
        2,
        "model.encoding: unknown encoding 'bogus'",
        files=yaml_file(
            "name: a\nsystem: hi\nmodel: {name: m, context_window: 4096, max_output_tokens: 256, encoding: bogus}\n"
        ),
    ),
}


def run(tmp_path: Path, case: Case) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "DATABASE_URL", "QDRANT_", "PAGEMIND_"))}
    env["PAGEMIND_HOME"] = str(tmp_path / "home")
    env.update(case.env)
    for name, content in case.files.items():
        (tmp_path / name).write_bytes(content)
    if case.prepare:
        case.prepare(tmp_path)
    argv = [os.fsencode(a) if isinstance(a, str) else a for a in case.argv]
    return subprocess.run(
        [os.fsencode(sys.executable), b"-m", b"pagemind.runtime.cli.main", *argv],
        cwd=tmp_path,
        env=env,
        input=case.stdin,
        capture_output=True,
        timeout=300,
    )


@pytest.mark.parametrize("name", list(CASES))
def test_hostile_input_is_one_clear_line_and_the_right_exit_code(tmp_path, name):
    case = CASES[name]
    done = run(tmp_path, case)
    stderr = done.stderr.decode("utf-8", "replace")
    assert "Traceback" not in stderr, stderr
    assert done.returncode == case.code, (done.returncode, stderr, done.stdout[-2000:])
    assert case.says in stderr + done.stdout.decode("utf-8", "replace"), stderr
    assert "hunter2" not in stderr
    if case.max_out is not None:
        assert len(done.stdout) <= case.max_out


def test_the_spec_knows_the_encodings_the_package_ships():
    from pagemind.runtime import tokens
    from pagemind.runtime.spec.agent import SHIPPED_ENCODINGS

    assert set(SHIPPED_ENCODINGS) == set(tokens._SHA256)


REPLY = {
    "id": "c1",
    "object": "chat.completion",
    "created": 0,
    "model": "m",
    "choices": [{"index": 0, "message": {"role": "assistant", "content": "Hello there."}, "finish_reason": "stop"}],
    "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
}


def test_chat_reports_a_failed_turn_or_a_line_that_is_not_utf8_and_takes_the_next_line(tmp_path):
    """The first request is rejected (HTTP 400), the second line is not UTF-8, the third gets a reply."""
    import http.server
    import threading

    class Server(http.server.BaseHTTPRequestHandler):
        calls = 0

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers.get("content-length", 0)))
            Server.calls += 1
            status, body = (
                (400, {"error": {"message": "nope", "type": "invalid_request_error"}})
                if Server.calls == 1
                else (200, REPLY)
            )
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Server)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/v1"
        case = Case(
            ["chat", "agent.yaml"],
            0,
            "",
            env={"OPENAI_BASE_URL": url, "OPENAI_API_KEY": "x"},
            files=yaml_file("name: chatty\nsystem: Be brief.\n" + GOOD_MODEL),
            stdin=b"first\n\xff\xfe oops\nsecond\n",
        )
        done = run(tmp_path, case)
    finally:
        server.shutdown()
    stderr = done.stderr.decode("utf-8", "replace")
    assert done.returncode == 0 and "Traceback" not in stderr, stderr
    assert "model request rejected (HTTP 400)" in stderr and "that line is not valid UTF-8" in stderr
    assert done.stdout.decode().count("chatty> Hello there.") == 1
    assert Server.calls == 2  # the undecodable line was never sent


KEEPER = """
name: keeper
model: {name: m, context_window: 4096, max_output_tokens: 256}
system: You keep notes.
tools: [send_message, archival_memory_insert, archival_search]
"""


def test_run_while_another_process_holds_the_archival_store_is_busy_and_stores_nothing(tmp_path, monkeypatch):
    import asyncio

    from pagemind.runtime import Agent
    from pagemind.runtime.memory.vectors.stores import close_all

    monkeypatch.setenv("PAGEMIND_HOME", str(tmp_path / "home"))
    for name in ("DATABASE_URL", "QDRANT_URL", "PAGEMIND_EMBEDDING_MODEL"):
        monkeypatch.delenv(name, raising=False)
    (tmp_path / "keeper.yaml").write_text(KEEPER)

    async def hold() -> Agent:
        agent = await Agent.load(tmp_path / "keeper.yaml")
        agent.archival.store  # this process now holds the embedded store
        return agent

    agent = asyncio.run(hold())
    try:
        case = Case(
            ["run", "keeper.yaml", "-m", "Hi, I'm Lin.", "--wait", "0.3"],
            3,
            f"in use by process {os.getpid()}",
            env={"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": "x"},
        )
        done = run(tmp_path, case)
        stderr = done.stderr.decode()
        assert done.returncode == 3 and "Traceback" not in stderr, stderr
        assert case.says in stderr and "Nothing was stored." in stderr
        assert agent.store.message_count(agent.record.id) == 0  # the message was not stored unanswered
    finally:
        close_all()
        agent.store.engine.dispose()
