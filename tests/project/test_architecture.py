"""The architecture's rules, checked: layer contracts, no import cycles, short files, a short loop, and an
installed distribution that adds nothing but the `pagemind` namespace to site-packages."""

from __future__ import annotations

import ast
import inspect
import shutil
import subprocess
import sys
import zipfile
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


def test_a_non_editable_install_adds_only_the_pagemind_namespace(tmp_path):
    source = tmp_path / "source"
    shutil.copytree(
        ROOT,
        source,
        ignore=shutil.ignore_patterns(
            ".venv", ".git", "build", "*.egg-info", ".pagemind", "__pycache__", ".pytest_cache"
        ),
    )
    built = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-index",
            "-q",
            "-w",
            str(tmp_path / "dist"),
            str(source),
        ],
        capture_output=True,
        text=True,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    [wheel] = (tmp_path / "dist").glob("pagemind-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        top_level = {name.split("/")[0] for name in archive.namelist()}
        names = set(archive.namelist())
    assert top_level == {"pagemind", wheel.name.split("-py")[0] + ".dist-info"}
    assert "pagemind/__init__.py" not in names  # a namespace: other distributions may not claim it either
    for package in ("runtime", "tools", "blocks", "scheduler"):
        assert f"pagemind/{package}/__init__.py" in names
    assert any(n.startswith("pagemind/runtime/data/models/") for n in names)  # the shipped embedding model
    assert any(n.startswith("pagemind/runtime/data/tiktoken/") for n in names)

    site = tmp_path / "site"
    installed = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q", "--target", str(site), str(wheel)],
        capture_output=True,
        text=True,
    )
    assert installed.returncode == 0, installed.stderr[-3000:]
    assert {p.name for p in site.iterdir() if not p.name.endswith(".dist-info")} == {"pagemind", "bin"}
    # The installed copy imports and finds its data, from another folder than the repository.
    probe = (
        "import pagemind.runtime.cli.main as m, pagemind.runtime.tokens as t; "
        "print(m.__file__); print(t.count_tokens('hello world', 'o200k_base'))"
    )
    run = subprocess.run(
        [sys.executable, "-I", "-c", f"import sys; sys.path.insert(0, {str(site)!r}); {probe}"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    module_file, tokens = run.stdout.split()
    assert module_file.startswith(str(site)) and int(tokens) == 2


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
