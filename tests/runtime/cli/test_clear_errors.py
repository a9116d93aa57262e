"""Inputs a user gets wrong end in one clear line, never "this is a bug in pagemind" nor a pydantic dump: a remote
`$ref` in a block's inline schema, a `mysql://` DATABASE_URL, a refused or malformed QDRANT_URL, a trace whose
recorded spec no longer loads, `serve` of a folder that does not exist."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

AGENT = """
name: plain
model: {name: m}
system: Hi.
tools: [send_message, archival_memory_insert, archival_search]
"""


def pagemind(tmp_path: Path, *args: str, module: str = "pagemind.runtime.cli.main", **env: str) -> tuple[int, str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "DATABASE_URL", "QDRANT_"))}
    environ.update(PAGEMIND_HOME=str(tmp_path / "home"), PAGEMIND_LOG_LEVEL="error", **env)
    done = subprocess.run(
        [sys.executable, "-m", module, *args], cwd=tmp_path, env=environ, capture_output=True, text=True, timeout=120
    )
    return done.returncode, done.stderr


def assert_one_clear_line(code: int, stderr: str, *expected: str) -> None:
    assert code == 2, stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert lines[0].startswith("error: ") and "bug in pagemind" not in stderr and "pydantic" not in stderr, stderr
    assert all(text in stderr for text in expected), stderr


def test_a_remote_ref_in_an_inline_schema(tmp_path):
    (tmp_path / "agent.yaml").write_text(
        AGENT + "blocks:\n  - {label: p, limit: 300, value: {}, schema: {$ref: 'http://127.0.0.1:9/s.json'}}\n"
    )
    code, stderr = pagemind(tmp_path, "context", "agent.yaml")
    assert_one_clear_line(code, stderr, "blocks[0].schema: $ref: 'http://127.0.0.1:9/s.json' is outside the schema")
    assert len(stderr.strip().splitlines()) == 2  # the kind of error, then the file's one problem


def test_a_database_url_pagemind_does_not_support(tmp_path):
    code, stderr = pagemind(tmp_path, "agents", DATABASE_URL="mysql://u:pw@localhost/db")
    assert_one_clear_line(code, stderr, "is not a database URL pagemind can use (mysql is not supported)")
    assert "pw" not in stderr


@pytest.mark.parametrize(
    ("url", "said"),
    [
        ("http://127.0.0.1:9", "cannot use the Qdrant server at QDRANT_URL='http://127.0.0.1:9'"),
        ("not a url", "QDRANT_URL='not a url' is not a Qdrant server URL"),
        ("http://[::1", "QDRANT_URL='http://[::1' is not a Qdrant server URL"),
    ],
)
def test_a_refused_or_malformed_qdrant_url(tmp_path, url, said):
    (tmp_path / "agent.yaml").write_text(AGENT)
    code, stderr = pagemind(
        tmp_path, "run", "agent.yaml", "-m", "hi", QDRANT_URL=url, OPENAI_BASE_URL="http://127.0.0.1:9/v1"
    )
    assert_one_clear_line(code, stderr, said)


def test_replay_of_a_trace_whose_spec_no_longer_loads(tmp_path):
    trace = Path(__file__).parents[2] / "traces"
    source = sorted(trace.glob("*.jsonl"))[0]
    lines = source.read_text().splitlines()
    header = json.loads(lines[0])
    header["spec"]["max_steps_per_turn"] = -1
    header["spec"]["blocks"][0]["limit"] = "many"
    (tmp_path / "bad.jsonl").write_text("\n".join([json.dumps(header), *lines[1:]]) + "\n")
    code, stderr = pagemind(tmp_path, "replay", "bad.jsonl")
    assert_one_clear_line(code, stderr, "the recorded agent spec no longer loads", "(and 1 more)")
    assert len(stderr.strip().splitlines()) == 1


def test_serve_of_a_folder_that_does_not_exist(tmp_path):
    code, stderr = pagemind(
        tmp_path, "serve", str(tmp_path / "nonexistent"), "--port", "9", module="pagemind.scheduler.cli"
    )
    assert code != 0 and "error: " in stderr and "nonexistent" in stderr, stderr
    assert "bug in pagemind" not in stderr
