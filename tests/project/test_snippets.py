"""Every ```python block in the README and the docs pages is a complete program, and runs: each is written to a
file in a temporary folder and run there by a fresh interpreter, in the folder a user would have after
`pagemind init` (the example agents in ./agents), with its own PAGEMIND_HOME and a scripted model endpoint
(tests/support/openai_stub.py, as OPENAI_BASE_URL) for the snippets that call a model from the environment; the
others use the documented test doubles (`pagemind.runtime.testing`).

A block that is deliberately no program is marked by an HTML comment on the line before it,
`<!-- not a program: why -->`; it is skipped, counted, and the count is checked (`FRAGMENTS`), so that an
exception is a decision, not an accident. Shell blocks are what a user types, and are not run.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pagemind.runtime.cli.init import write_examples

ROOT = Path(__file__).parents[2]
DOCUMENTS = [ROOT / "README.md", *sorted((ROOT / "docs" / "pages").rglob("*.md"))]
PYTHON_FENCE = re.compile(r"^```(?:python|py)\b[^\n]*\n(.*?)^```[ \t]*$", re.M | re.S)
FRAGMENT = re.compile(r"<!--\s*not a program:\s*(.+?)\s*-->\s*\Z", re.S)
FRAGMENTS = 0
"""How many python blocks are marked as no program (none today): a new one changes this on purpose."""


@dataclass(frozen=True)
class Snippet:
    """One python block: where it starts, its code, and why it is no program (None: it is one)."""

    where: str
    code: str
    fragment: str | None


def snippets(text: str, name: str) -> Iterator[Snippet]:
    """The python blocks of a Markdown document."""
    for match in PYTHON_FENCE.finditer(text):
        line = text.count("\n", 0, match.start()) + 1
        before = text[: match.start()].rstrip().rsplit("\n", 1)[-1]
        marked = FRAGMENT.search(before)
        yield Snippet(f"{name}:{line}", match.group(1), marked.group(1) if marked else None)


ALL = [s for document in DOCUMENTS for s in snippets(document.read_text(encoding="utf-8"), document.name)]


@pytest.fixture(scope="module")
def model_url() -> Iterator[str]:
    """The scripted OpenAI-compatible endpoint (another process): it edits `human` and echoes the message."""
    process = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "support" / "openai_stub.py"), "--latency-ms", "0"],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    port = int(process.stdout.readline().split()[-1])
    yield f"http://127.0.0.1:{port}/v1"
    process.terminate()
    process.wait(10)


@pytest.mark.parametrize("snippet", ALL, ids=[s.where for s in ALL])
def test_the_snippet_runs_as_a_program(snippet: Snippet, tmp_path: Path, model_url: str):
    if snippet.fragment is not None:
        pytest.skip(f"marked as no program: {snippet.fragment}")
    write_examples(tmp_path / "agents")  # what `pagemind init` writes: the snippets' agents/companion.yaml
    program = tmp_path / "snippet.py"
    program.write_text(snippet.code, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "DATABASE_URL", "QDRANT_"))}
    env.update(PAGEMIND_HOME=str(tmp_path / "home"), OPENAI_BASE_URL=model_url, OPENAI_API_KEY="test-key")
    done = subprocess.run(
        [sys.executable, str(program)], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, f"{snippet.where} failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}"


def test_every_page_is_searched_and_the_exceptions_are_counted():
    assert len(ALL) >= 6 and {s.where.split(":")[0] for s in ALL} >= {"README.md", "python.md", "tools.md"}
    marked = [s.where for s in ALL if s.fragment is not None]
    assert len(marked) == FRAGMENTS, f"python blocks marked as no program: {marked}"


def test_a_marked_block_is_told_apart_and_an_unmarked_one_is_not():
    text = (
        "Intro.\n\n<!-- not a program: a method body -->\n```python\nself.x = 1\n```\n\n"
        '```python title="a.py"\nprint(1)\n```\n\n```bash\nls\n```\n'
    )
    found = list(snippets(text, "page.md"))
    assert [(s.where, s.code, s.fragment) for s in found] == [
        ("page.md:4", "self.x = 1\n", "a method body"),
        ("page.md:8", "print(1)\n", None),
    ]
