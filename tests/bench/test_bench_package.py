"""bench/ is a package of modules run as `python -m bench.NAME` from the repository root: no path tricks, nothing
run at import, and bench/RESULTS.md made of one marked block per benchmark that `bench.common.write_section`
rewrites in place."""

from __future__ import annotations

import ast
import importlib
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest

import bench
from bench.common import RESULTS, ROOT, read_section, write_section

BENCH = ROOT / "bench"
MODULES = sorted(m.name for m in pkgutil.iter_modules(bench.__path__))
# Spelled in pieces, so that this file does not match itself.
FORBIDDEN = ("sys.path" + ".insert", "sys.path" + ".append", "noqa: " + "E402", "python " + "bench/")
BLOCK = re.compile(r"^<!-- bench:(?P<key>[^ ]+) -->\n(?P<body>.*?)^<!-- /bench:(?P=key) -->$", re.S | re.M)


def files() -> list[Path]:
    """Every text file of bench/ and of these tests."""
    found = [p for p in BENCH.rglob("*") if p.is_file() and "__pycache__" not in p.parts]
    return found + [p for p in (ROOT / "tests" / "bench").rglob("*.py")]


def test_the_modules_are_found():
    assert {"common", "daemon_throughput", "retrieval_locomo"} <= set(MODULES)
    assert (BENCH / "__init__.py").exists()


@pytest.mark.parametrize("path", files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_path_edits_no_import_order_suppressions_no_script_paths(path: Path):
    text = path.read_text(encoding="utf-8")
    assert not [needle for needle in FORBIDDEN if needle in text]


def _runs_at_import(node: ast.stmt) -> bool:
    """A top-level statement other than imports, definitions, assignments, the docstring or the main guard."""
    if isinstance(node, ast.Import | ast.ImportFrom | ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return False
    if isinstance(node, ast.Assign | ast.AnnAssign):
        return False
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant):
        return False
    if isinstance(node, ast.If):
        test = node.test
        return not (
            isinstance(test, ast.Compare)
            and isinstance(test.left, ast.Name)
            and test.left.id == "__name__"
            and isinstance(test.comparators[0], ast.Constant)
            and test.comparators[0].value == "__main__"
        )
    return True


@pytest.mark.parametrize("name", MODULES)
def test_every_module_imports_and_does_its_work_only_when_run(name: str):
    tree = ast.parse((BENCH / f"{name}.py").read_text(encoding="utf-8"))
    assert [ast.unparse(node)[:80] for node in tree.body if _runs_at_import(node)] == []
    importlib.import_module(f"bench.{name}")


@pytest.mark.parametrize("name", ["daemon_ab", "agent_create", "step_cost_ab"])
def test_a_module_runs_with_python_dash_m_from_the_root(name: str):
    done = subprocess.run(
        [sys.executable, "-m", f"bench.{name}", "--help"], cwd=ROOT, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("usage:")


def test_results_is_one_marked_block_per_benchmark():
    text = RESULTS.read_text(encoding="utf-8")
    blocks = [(m["key"], m["body"]) for m in BLOCK.finditer(text)]
    keys = [key for key, _ in blocks]
    opened, closed = (len(re.findall(rf"^<!-- {mark}:", text, re.M)) for mark in ("bench", "/bench"))
    assert len(keys) == len(set(keys)) == opened == closed
    assert {key.split(".")[0] for key in keys} <= set(MODULES)
    for key, body in blocks:
        title, blank, measured = body.split("\n")[:3]
        assert title.startswith("## ") and blank == "" and measured.startswith("Measured "), key
        # when · commit · machine
        assert re.fullmatch(r"Measured \d{4}-\d\d-\d\d .+ · .*\b[0-9a-f]{7}\b.* · .+", measured), key
    assert len(text.splitlines()) < 1000


def test_write_section_replaces_its_own_block_and_adds_a_new_one(tmp_path: Path):
    results = tmp_path / "RESULTS.md"
    results.write_text(RESULTS.read_text(encoding="utf-8"), encoding="utf-8")
    before = {m["key"]: m.group(0) for m in BLOCK.finditer(results.read_text(encoding="utf-8"))}

    write_section("step_overhead", "Step overhead", "| a | b |\n| --- | --- |\n| 1 | 2 |\n", results)
    write_section("step_overhead", "Step overhead", "load average 0.10 at start.\n\n| a |\n| --- |\n| 3 |", results)
    write_section("new_bench.mode", "A new benchmark", "figures", results)

    after = {m["key"]: m.group(0) for m in BLOCK.finditer(results.read_text(encoding="utf-8"))}
    assert list(after) == [*before, "new_bench.mode"]
    assert all(after[key] == block for key, block in before.items() if key != "step_overhead")
    lines = read_section("step_overhead", results).splitlines()
    assert lines[:2] == ["<!-- bench:step_overhead -->", "## Step overhead"]
    assert re.fullmatch(r"Measured \d{4}-\d\d-\d\d \d\d:\d\d UTC · commit \S+.* · .+ CPUs, .+\.", lines[3])
    end = "<!-- /bench:step_overhead -->"
    assert lines[5:] == ["Load average 0.10 at start.", "", "| a |", "| --- |", "| 3 |", end]
    assert read_section("absent", results) == ""


def test_write_section_starts_a_missing_file(tmp_path: Path):
    results = tmp_path / "RESULTS.md"
    write_section("queue_compare", "Queue comparison", "3 rows", results)
    text = results.read_text(encoding="utf-8")
    assert text.startswith("# Benchmark results\n")
    assert read_section("queue_compare", results).endswith("\n3 rows\n<!-- /bench:queue_compare -->\n")
    with pytest.raises(ValueError):
        write_section("Not A Key", "x", "y", results)
