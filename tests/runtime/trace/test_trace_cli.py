"""The trace commands as a user runs them: run records, trace ls/show/export, replay and fork."""

import json
from pathlib import Path

import pytest

from pagemind.runtime.cli.main import main
from pagemind.runtime.testing.endpoint import BASE_URL, TEST_API_KEY, http_error
from pagemind.runtime.testing.responses import tool_call_body as tool_call
from pagemind.runtime.trace.reader import read_trace

USER_TEXT = "Hi, I'm Lin. I'm allergic to peanuts."
COMPANION = str(Path(__file__).parents[3] / "agents" / "companion.yaml")


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    """A fresh PAGEMIND_HOME and an endpoint pointed at the mocked OpenAI API."""
    # main() would point structlog at pytest's captured stderr, which is closed after the test.
    monkeypatch.setattr("pagemind.runtime.cli.main.configure_logging", lambda *args, **kwargs: None)
    for name in ("DATABASE_URL", "QDRANT_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PAGEMIND_HOME", str(tmp_path / "home"))
    monkeypatch.setenv("OPENAI_BASE_URL", BASE_URL)
    monkeypatch.setenv("OPENAI_API_KEY", TEST_API_KEY)
    monkeypatch.chdir(tmp_path)
    return tmp_path / "home"


def run_once(scripted_openai, capsys) -> None:
    scripted_openai.add(
        tool_call("core_memory_append", {"label": "human", "content": "Lin, allergic to peanuts"}),
        tool_call("send_message", {"message": "Nice to meet you, Lin."}),
    )
    assert main(["run", COMPANION, "-m", USER_TEXT]) == 0
    assert capsys.readouterr().out == "Nice to meet you, Lin.\n"


def test_run_records_a_trace_that_ls_show_and_replay_read(home, scripted_openai, capsys):
    run_once(scripted_openai, capsys)
    [path] = list((home / "traces" / "companion").glob("*.jsonl"))
    assert TEST_API_KEY.encode() not in path.read_bytes()

    assert main(["trace", "ls", COMPANION]) == 0
    listing = capsys.readouterr().out.splitlines()
    assert listing[0].split() == ["TRACE", "WHEN", "(UTC)", "TURNS", "STEPS", "TOKENS", "STOP"]
    assert listing[1].startswith(path.stem) and listing[1].split()[-4:] == ["1", "2", "-", "send_message"]

    trace_id = path.stem.split("-")[-1]
    assert main(["trace", "show", trace_id]) == 0
    shown = capsys.readouterr().out
    assert f"user › {USER_TEXT}" in shown
    assert 'call → core_memory_append(label="human", content="Lin, allergic to peanuts")' in shown
    assert "memory ✎ human (append): + 'Lin, allergic to peanuts'" in shown
    assert "end    turn over (send_message)" in shown and "block:persona" in shown

    assert main(["replay", str(path)]) == 0
    assert capsys.readouterr().out.startswith("identical: 1 turn(s), 2 step(s)")
    assert main(["replay", trace_id, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["status"] == "identical"


def test_run_writes_to_a_given_path(home, scripted_openai, capsys, tmp_path):
    scripted_openai.add(tool_call("send_message", {"message": "hello"}))
    assert main(["run", COMPANION, "-m", "hi", "--trace", str(tmp_path / "mine.jsonl")]) == 0
    assert (tmp_path / "mine.jsonl").exists() and not (home / "traces").exists()


def test_a_run_whose_model_fails_still_leaves_its_trace(home, scripted_openai, capsys):
    scripted_openai.add(
        tool_call("core_memory_append", {"label": "human", "content": "Lin"}),
        http_error(400, "this model does not support tools"),
    )
    assert main(["run", COMPANION, "-m", USER_TEXT]) == 1
    assert "does not support tools" in capsys.readouterr().err
    [path] = list((home / "traces" / "companion").glob("*.jsonl"))
    trace = read_trace(path)
    assert not trace.complete and trace.steps == [(1, 1)]
    # the second step's request, which got no answer, is in the file (after the statistics its prompt read)
    last = [json.loads(line) for line in path.read_text().splitlines()[-trace.dropped :]]
    assert [e["type"] for e in last] == ["memory_read", "model_request"] and last[1]["step"] == 2


def test_replay_reports_a_divergence_with_exit_1(home, scripted_openai, capsys):
    run_once(scripted_openai, capsys)
    [path] = list((home / "traces" / "companion").glob("*.jsonl"))
    lines = path.read_text().splitlines()
    header = json.loads(lines[0])
    header["snapshot"]["blocks"][1]["value"] = "Name: Sam"
    path.write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    assert main(["replay", str(path)]) == 1
    output = capsys.readouterr().out
    assert output.startswith(f"DIVERGED at event 5 of 16 ({path.name}:6), turn 1 step 1")
    assert "+Name: Sam" in output


def test_unreadable_traces_are_clear_errors_with_exit_2(home, capsys, tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"type": "header", "schema_version": 7}\n')
    assert main(["replay", str(bad)]) == 2
    assert f"error: cannot read trace: {bad}:1: unknown schema_version 7" in capsys.readouterr().err
    assert main(["trace", "show", "nope"]) == 2
    assert "no trace file or trace id 'nope'" in capsys.readouterr().err


def test_export_redact_replaces_user_and_memory_text(home, scripted_openai, capsys, tmp_path):
    run_once(scripted_openai, capsys)
    [path] = list((home / "traces" / "companion").glob("*.jsonl"))
    out = tmp_path / "shared.jsonl"
    assert main(["trace", "export", str(path), "--redact", "-o", str(out)]) == 0
    assert f"wrote {out} (redacted:" in capsys.readouterr().out
    data = out.read_text()
    events = [json.loads(line) for line in data.splitlines()]
    for event in events:  # tool schemas are the runtime's text (their examples may name anyone): kept as they are
        (event.get("body") or {}).pop("tools", None)
    without_schemas = json.dumps(events, ensure_ascii=False)
    for secret in ("Lin", "peanuts", "gentle and curious companion"):
        assert secret not in without_schemas
    assert "«user-1»" in data and "«memory-" in data
    # Stable: the user's text has one placeholder wherever it appears (turn event and every prompt).
    turn = next(e for e in events if e["type"] == "turn")
    prompts = [e["body"]["messages"] for e in events if e["type"] == "model_request"]
    assert turn["user_message"] == "«user-1»"
    assert all(any(m["role"] == "user" and m["content"] == "«user-1»" for m in p) for p in prompts)
    assert main(["trace", "show", str(out)]) == 0
    assert "(redacted copy: user and memory text are placeholders)" in capsys.readouterr().out


def test_replay_live_from_step_forks_into_a_new_trace(home, scripted_openai, capsys):
    run_once(scripted_openai, capsys)
    [path] = list((home / "traces" / "companion").glob("*.jsonl"))
    scripted_openai.add(tool_call("send_message", {"message": "Hello from the live model."}))
    assert main(["replay", str(path), "--live", "--from-step", "2"]) == 0
    said, output = capsys.readouterr().out.split("\n", 1)
    assert said.startswith("live model: ") and said.endswith(", key from $OPENAI_API_KEY")  # before the call
    assert output.startswith("forked: 1 recorded step(s) replayed identically, then the live model; new trace: ")
    fork = Path(output.split("new trace: ")[1].strip())
    assert fork.parent == path.parent and fork != path
    assert main(["trace", "ls", "companion"]) == 0
    assert f"(fork of {path.stem} at step 2)" in capsys.readouterr().out
    assert main(["replay", "--live", str(path)]) == 2
    assert "--live and --from-step N go together" in capsys.readouterr().err
