"""`pagemind privacy scan` as an operator runs it: the installed command, lines on stdin, JSON lines out."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from tests.support.installed import clean_env, pagemind_command

LINES = [
    "call me at 138 0013 8000 or mail lin@example.com",
    "住在北京市朝阳区建国路88号，身份证11010519491231002X，电话+86 13800138000",
    "order 4839201746 shipped on 2024-03-15, version 1.2.3.4",
    "card 4111-1111-1111-1111, IBAN GB82 WEST 1234 5698 7654 32, passport E12345678, from 10.0.0.1",
]


def scan(venv: Path, tmp_path: Path, text: str, *args: str) -> subprocess.CompletedProcess[str]:
    environ = clean_env(PAGEMIND_HOME=str(tmp_path / "home"), HOME=str(tmp_path))
    command = [pagemind_command(venv), "privacy", "scan", *args]
    return subprocess.run(command, input=text, cwd=tmp_path, env=environ, capture_output=True, text=True, timeout=60)


def test_scan_writes_one_json_line_per_input_line(venv, tmp_path):
    done = scan(venv, tmp_path, "\n".join(LINES) + "\n")
    assert done.returncode == 0, done.stderr
    out = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(out) == len(LINES)
    for line, result in zip(LINES, out, strict=True):  # offsets are characters of the input line
        assert all(line[s["start"] : s["end"]].strip() for s in result["spans"])
    assert out[0] == {
        "text": "call me at [phone#1] or mail [email#1]",
        "spans": [{"start": 11, "end": 24, "kind": "phone"}, {"start": 33, "end": 48, "kind": "email"}],
    }
    assert out[1]["text"] == "住在[address#1]，身份证[cn_id#1]，电话[phone#1]"  # the same number as line 1
    assert [s["kind"] for s in out[1]["spans"]] == ["address", "cn_id", "phone"]
    assert out[2] == {"text": LINES[2], "spans": []}  # an order number, a date, a version string
    assert [s["kind"] for s in out[3]["spans"]] == ["card", "iban", "passport", "ip"]
    assert not (tmp_path / "home").exists()  # nothing of the state folder is touched


def test_scan_for_chosen_kinds_and_a_clear_error_for_an_unknown_one(venv, tmp_path):
    done = scan(venv, tmp_path, LINES[0] + "\r\n", "--kinds", "email")
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {
        "text": "call me at 138 0013 8000 or mail [email#1]",
        "spans": [{"start": 33, "end": 48, "kind": "email"}],
    }
    bad = scan(venv, tmp_path, "x\n", "--kinds", "email,fax")
    assert bad.returncode == 2 and "unknown kind fax" in bad.stderr
