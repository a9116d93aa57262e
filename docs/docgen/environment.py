"""The environment variables, from `Settings` (runtime/process/settings.py) and a search of the source.

`Settings` declares one field per variable pagemind reads (the variable in the field's `json_schema_extra["env"]`,
what it does in its description) and lists the others it sets or honours in `Settings.VARIABLES`; both tables are
generated from there. Variables only the tests and benchmarks read are described by hand, in environment.md.

So that neither can fall behind the code, the source is searched too: a variable the code reads that neither
`Settings` nor the page's hand-written table describes, or a hand-written row for a variable nothing reads, is a
problem that fails a strict build. A variable is a string literal of its exact name (`PAGEMIND_*`, `OPENAI_*`,
`QDRANT_*`, `DATABASE_URL`): in the product's folders every such literal counts, in the tests and benchmarks only
reads (`os.environ.get(…)`, `os.getenv(…)`, `os.environ[…]`), since they also set and strip variables for the
processes they start. Where a field is read through `Settings.read("field")`, those modules are listed too.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from docgen.models import escape_cell, resolve, type_text

NAME = re.compile(r"^(?:PAGEMIND_[A-Z0-9_]+|OPENAI_[A-Z0-9_]+|QDRANT_[A-Z0-9_]+|DATABASE_URL)$")
PRODUCT = ("runtime", "scheduler", "tools", "blocks")
AROUND = ("tests", "bench")
_ROW_NAMES = re.compile(r"`([A-Z][A-Z0-9_]+)`")


@dataclass
class Declared:
    """A variable as `Settings` declares it: the field holding it (None: not read into Settings), its type."""

    name: str
    field: str | None
    type: str | None
    description: str


@dataclass
class Found:
    """Where the source reads variables: `product[name]`, `around[name]` (tests and benchmarks only) and
    `fields[field]` (modules calling `Settings.read("field")`), each a list of files."""

    product: dict[str, list[str]]
    around: dict[str, list[str]]
    fields: dict[str, list[str]]


def declared() -> list[Declared]:
    """Every variable `Settings` declares, fields first, in their order."""
    from pagemind.runtime.process.settings import Settings

    found = []
    for field, info in Settings.model_fields.items():
        extra = info.json_schema_extra if isinstance(info.json_schema_extra, dict) else {}
        name = extra.get("env")
        if isinstance(name, str):
            text = re.sub(rf"^`{re.escape(name)}`:\s*", "", info.description or "")
            found.append(Declared(name, field, type_text(resolve(info.annotation, Settings)), text))
    for variable in getattr(Settings, "VARIABLES", ()):
        if variable.field is None:
            found.append(Declared(variable.name, None, None, variable.description))
    return found


def _files(root: Path, folders: Iterable[str]) -> Iterable[Path]:
    for folder in folders:
        yield from sorted((root / folder).rglob("*.py"))


def _literals(tree: ast.AST) -> Iterable[str]:
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and NAME.match(node.value):
            yield node.value


def _is_environ(node: ast.AST) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ"


def _reads(tree: ast.AST) -> Iterable[str]:
    for node in ast.walk(tree):
        target: ast.AST | None = None
        if isinstance(node, ast.Call) and node.args:
            func = node.func
            is_get = isinstance(func, ast.Attribute) and func.attr == "get" and _is_environ(func.value)
            is_getenv = isinstance(func, ast.Attribute) and func.attr == "getenv"
            target = node.args[0] if is_get or is_getenv else None
        elif isinstance(node, ast.Subscript) and _is_environ(node.value):
            target = node.slice
        if isinstance(target, ast.Constant) and isinstance(target.value, str) and NAME.match(target.value):
            yield target.value


def _settings_reads(tree: ast.AST) -> Iterable[str]:
    for node in ast.walk(tree):
        func = node.func if isinstance(node, ast.Call) else None
        if (
            isinstance(func, ast.Attribute)
            and func.attr == "read"
            and isinstance(func.value, ast.Name)
            and func.value.id == "Settings"
            and node.args  # type: ignore[union-attr]
            and isinstance(node.args[0], ast.Constant)  # type: ignore[union-attr]
        ):
            yield str(node.args[0].value)  # type: ignore[union-attr]


def scan(root: Path) -> Found:
    found = Found({}, {}, {})
    for path in _files(root, PRODUCT):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        where = str(path.relative_to(root))
        for name in sorted(set(_literals(tree))):
            found.product.setdefault(name, []).append(where)
        for field in sorted(set(_settings_reads(tree))):
            found.fields.setdefault(field, []).append(where)
    for path in _files(root, AROUND):
        for name in sorted(set(_reads(ast.parse(path.read_text(encoding="utf-8"))))):
            if name not in found.product:
                found.around.setdefault(name, []).append(str(path.relative_to(root)))
    return found


def hand_written(markdown: str) -> set[str]:
    """The variables the page's hand-written tables name (backquoted names in a row's first cell)."""
    names = set()
    for line in markdown.splitlines():
        cells = line.split("|")
        if line.startswith("|") and len(cells) > 2:
            names.update(n for n in _ROW_NAMES.findall(cells[1]) if NAME.match(n))
    return names


def problems(markdown: str, found: Found, variables: list[Declared]) -> list[str]:
    """What the source, `Settings` and the page's hand-written tables disagree on, one line each."""
    by_settings = {part.strip() for v in variables for part in v.name.split(",")}
    by_hand = hand_written(markdown)
    read = {**found.around, **found.product}
    missing = [
        f"{name} is read in {', '.join(files)} but neither Settings nor a table of environment.md describes it"
        for name, files in sorted(read.items())
        if name not in by_settings | by_hand
    ]
    stale = [f"environment.md describes {n}, which nothing in the source reads" for n in sorted(by_hand - read.keys())]
    twice = [f"environment.md describes {n}, which Settings describes already" for n in sorted(by_hand & by_settings)]
    return missing + stale + twice


def settings_table(variables: list[Declared], found: Found) -> str:
    lines = [
        "| variable | `Settings` field | type | what | named, or read with `Settings.read`, in |",
        "| --- | --- | --- | --- | --- |",
    ]
    for v in (v for v in variables if v.field is not None):
        sites = sorted(set(found.product.get(v.name, [])) | set(found.fields.get(v.field or "", [])))
        where = ", ".join(f"`{s}`" for s in sites) or "—"
        lines.append(f"| `{v.name}` | `{v.field}` | `{v.type}` | {escape_cell(v.description) or '—'} | {where} |")
    return "\n".join(lines)


def others_table(variables: list[Declared]) -> str:
    lines = ["| variable | what |", "| --- | --- |"]
    for v in (v for v in variables if v.field is None):
        names = ", ".join(f"`{part.strip()}`" for part in v.name.split(","))
        lines.append(f"| {names} | {escape_cell(v.description) or '—'} |")
    return "\n".join(lines)


def around_table(found: Found) -> str:
    lines = ["| variable | read in |", "| --- | --- |"]
    for name, files in sorted(found.around.items()):
        lines.append(f"| `{name}` | {', '.join(f'`{f}`' for f in files)} |")
    return "\n".join(lines)
