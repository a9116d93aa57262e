"""Hostile input: every failure is one clear line with the right exit code (0 ok, 1 model failure or replay
divergence, 2 bad input or configuration, 3 agent busy), never a traceback. Each case runs the real `pagemind`
command in a subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import pytest

ROOT = Path(__file__).parent.parent
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


def yaml_file(text: str | bytes) -> dict[str, bytes]:
    return {"agent.yaml": text if isinstance(text, bytes) else text.encode()}


CASES: dict[str, Case] = {
    "log level bogus": Case(["agents"], 2, "PAGEMIND_LOG_LEVEL='bogus' is not a level",
                            env={"PAGEMIND_LOG_LEVEL": "bogus"}),
    "yaml duplicate key": Case(["context", "agent.yaml"], 2, "agent.yaml:2 name: duplicate key 'name'",
                               files=yaml_file("name: a\nname: b\nsystem: hi\n" + GOOD_MODEL)),
    "yaml not utf-8": Case(["context", "agent.yaml"], 2, "agent.yaml:2 not UTF-8 text",
                           files=yaml_file(b"name: a\nsystem: h\xff\xfei\n" + GOOD_MODEL.encode())),
    "yaml nested 100000 deep": Case(["context", "agent.yaml"], 2, "nested too deeply",
                                    files=yaml_file("a: " + "[" * 100_000 + "]" * 100_000 + "\n")),
    "window not above output reserve": Case(
        ["context", "agent.yaml"], 2, "agent.yaml:3 model.context_window: 256 leaves no room",
        files=yaml_file("name: a\nsystem: hi\nmodel: {name: m, context_window: 256, max_output_tokens: 256}\n")),
    "unknown encoding": Case(
        ["context", "agent.yaml"], 2, "model.encoding: unknown encoding 'bogus'",
        files=yaml_file("name: a\nsystem: hi\nmodel: {name: m, context_window: 4096, max_output_tokens: 256, "
                        "encoding: bogus}\n")),
}


def run(tmp_path: Path, case: Case) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items()
           if not k.startswith(("OPENAI_", "DATABASE_URL", "QDRANT_", "PAGEMIND_"))}
    env["PAGEMIND_HOME"] = str(tmp_path / "home")
    env.update(case.env)
    for name, content in case.files.items():
        (tmp_path / name).write_bytes(content)
    if case.prepare:
        case.prepare(tmp_path)
    argv = [os.fsencode(a) if isinstance(a, str) else a for a in case.argv]
    return subprocess.run([os.fsencode(sys.executable), b"-m", b"pagemind.runtime.cli.main", *argv], cwd=tmp_path,
                          env=env, input=case.stdin, capture_output=True, timeout=300)


@pytest.mark.parametrize("name", list(CASES))
def test_hostile_input_is_one_clear_line_and_the_right_exit_code(tmp_path, name):
    case = CASES[name]
    done = run(tmp_path, case)
    stderr = done.stderr.decode("utf-8", "replace")
    assert "Traceback" not in stderr, stderr
    assert done.returncode == case.code, (done.returncode, stderr, done.stdout[-2000:])
    assert case.says in stderr + done.stdout.decode("utf-8", "replace"), stderr


def test_the_spec_knows_the_encodings_the_package_ships():
    from pagemind.runtime import tokens
    from pagemind.runtime.spec import SHIPPED_ENCODINGS

    assert set(SHIPPED_ENCODINGS) == set(tokens._SHA256)
