"""The architecture's rules, checked: layer contracts, no import cycles, short files and folders, a short loop, no
private name used across modules. (The installed wheel: tests/project/test_wheel.py.)"""

from __future__ import annotations

import ast
import inspect
import re
import subprocess
import sys
from pathlib import Path

import grimp

from pagemind.runtime import loop

ROOT = Path(__file__).parents[2]
BIN = Path(sys.executable).parent
PACKAGES = ("pagemind.runtime", "pagemind.tools", "pagemind.blocks", "pagemind.scheduler")
SOURCE_FOLDERS = ("runtime", "tools", "blocks", "scheduler")


def test_import_linter_contracts_are_kept():
    result = subprocess.run([str(BIN / "lint-imports")], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-2000:]
    assert "0 broken" in result.stdout


def _cycles(graph: grimp.ImportGraph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan), i.e. import cycles."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        on_stack.add(module)
        for imported in graph.find_modules_directly_imported_by(module):
            if imported not in index:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in on_stack:
                low[module] = min(low[module], index[imported])
        if low[module] == index[module]:
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == module:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return found


def test_no_import_cycles_not_even_inside_functions_or_under_type_checking():
    # grimp reads every import statement, including those inside functions and under TYPE_CHECKING.
    graph = grimp.build_graph(*PACKAGES, exclude_type_checking_imports=False)
    assert _cycles(graph) == []


def test_the_cycle_finder_finds_a_cycle():
    graph = grimp.ImportGraph()
    for a, b in (("p.a", "p.b"), ("p.b", "p.c"), ("p.c", "p.a"), ("p.c", "p.d")):
        graph.add_import(importer=a, imported=b)
    assert _cycles(graph) == [["p.a", "p.b", "p.c"]]


def test_no_source_file_over_550_lines():
    # Counted as ruff formats them (one argument per line once a call wraps): a module is one concept, and a file
    # this long is a sign it holds two.
    long = {
        str(path.relative_to(ROOT)): n
        for folder in SOURCE_FOLDERS
        for path in (ROOT / folder).rglob("*.py")
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > 550
    }
    assert long == {}


def test_the_turn_and_the_step_read_at_once():
    lines = sum(len(inspect.getsource(f).splitlines()) for f in (loop.run_turn, loop.run_step))
    assert lines <= 120


def test_no_module_imports_the_repository_folders_as_top_level_packages():
    offenders = []
    for folder in (*SOURCE_FOLDERS, "tests", "bench"):
        for path in (ROOT / folder).rglob("*.py"):
            for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                words = line.split()
                if len(words) >= 2 and words[0] in ("import", "from") and words[1].split(".")[0] in SOURCE_FOLDERS:
                    offenders.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert offenders == []


def test_no_folder_holds_more_than_15_modules():
    crowded = {
        str(folder.relative_to(ROOT)): count
        for top in (*SOURCE_FOLDERS, "tests")
        for folder in [ROOT / top, *(p for p in (ROOT / top).rglob("*") if p.is_dir())]
        if (count := len([m for m in folder.glob("*.py") if m.name != "__init__.py"])) > 15
    }
    assert crowded == {}


def _private_imports(path: Path, root: Path = ROOT) -> list[str]:
    """`from pagemind.x import _y` (or tests., bench.) in one file: a private name used across modules."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return [
        f"{path.relative_to(root)}:{node.lineno}: from {node.module} import {alias.name}"
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
        and node.module
        and node.module.split(".")[0] in ("pagemind", "tests", "bench")
        for alias in node.names
        if alias.name.startswith("_") and not alias.name.startswith("__")
    ]


def test_no_private_name_is_imported_across_modules():
    found = [
        hit
        for folder in (*SOURCE_FOLDERS, "tests", "bench")
        for path in sorted((ROOT / folder).rglob("*.py"))
        for hit in _private_imports(path)
    ]
    assert found == []


def test_the_private_import_check_finds_one(tmp_path):
    probe = tmp_path / "probe.py"
    probe.write_text("def f():\n    from pagemind.runtime.compiler import _tokens as t, wire_message_tokens\n")
    assert _private_imports(probe, tmp_path) == ["probe.py:2: from pagemind.runtime.compiler import _tokens"]


def test_block_versions_are_written_by_one_module():
    """A block's history rows (a step's edits, an operator's, a reset's) are made in `runtime/state/block_edits.py`."""
    writes = re.compile(r"INSERT INTO block_versions|(?<!class )BlockVersionRow\(|(insert|table_of)\(BlockVersionRow")
    writers = sorted(
        str(path.relative_to(ROOT))
        for folder in SOURCE_FOLDERS
        for path in (ROOT / folder).rglob("*.py")
        if "migrations" not in path.parts and writes.search(path.read_text(encoding="utf-8"))
    )
    assert writers == ["runtime/state/block_edits.py"]
