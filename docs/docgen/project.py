"""The command line's help and the layer contracts, as Markdown: both are read from where they are defined (the
argparse parser the `pagemind` script builds, `pyproject.toml`'s import-linter contracts), so the pages cannot
describe a command or a layer that is not there."""

from __future__ import annotations

import argparse
import ast
import os
import tomllib
from collections.abc import Iterator
from pathlib import Path

from docgen.models import escape_cell

HELP_COLUMNS = "100"  # argparse wraps at the terminal's width; a fixed one keeps the page the same everywhere


def _commands(parser: argparse.ArgumentParser, prefix: str) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every command and subcommand under `parser`, depth first, in the order they were added."""
    for action in parser._actions:  # argparse keeps its subcommands here and nowhere public
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield f"{prefix} {name}", sub
                yield from _commands(sub, f"{prefix} {name}")


def _help(parser: argparse.ArgumentParser) -> list[str]:
    return [f"## `{parser.prog}`", "", "```text", parser.format_help().rstrip(), "```", ""]


def cli_reference() -> str:
    """`--help` of every command of `pagemind`, as the installed script prints it."""
    from pagemind.runtime.cli.main import build_parser
    from pagemind.runtime.cli.memory import memory_parser
    from pagemind.scheduler.cli import add_parsers

    before = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = HELP_COLUMNS
    try:
        main = build_parser(add_parsers)
        lines: list[str] = []
        for name, parser in [("pagemind", main), *_commands(main, "pagemind")]:
            lines += _help(parser)
            if name == "pagemind memory":
                # `memory search|archival|forget` have a parser of their own (`memory AGENT` takes any word as
                # the agent's name), so they are listed from it, here.
                lines += [
                    line
                    for inner, sub in _commands(memory_parser(), "pagemind")
                    if inner != name
                    for line in _help(sub)
                ]
        return "\n".join(lines)
    finally:
        if before is None:
            os.environ.pop("COLUMNS", None)
        else:
            os.environ["COLUMNS"] = before


def layers(root: Path) -> str:
    """Each import-linter contract of `pyproject.toml`: its layers from top to bottom."""
    config = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))
    lines = []
    for contract in config["tool"]["importlinter"]["contracts"]:
        lines += [f"**{contract['name']}** ({contract['type']})", ""]
        for number, layer in enumerate(contract.get("layers", []), 1):
            siblings = [f"`{part.strip()}`" for part in layer.split("|")]
            note = " (siblings: none imports another)" if len(siblings) > 1 else ""
            lines.append(f"{number}. {' · '.join(siblings)}{note}")
        lines.append("")
    return "\n".join(lines)


SOURCE_FOLDERS = ("runtime", "tools", "blocks", "scheduler")


def _summary(path: Path) -> str:
    """The first paragraph of a module's docstring, on one line."""
    text = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    return " ".join(text.split("\n\n")[0].split())


def package_map(root: Path) -> str:
    """Every package of the distribution with what its `__init__` docstring says it is, and its modules."""
    lines = ["| package | folder | what | modules |", "| --- | --- | --- | --- |"]
    for folder in SOURCE_FOLDERS:
        for init in sorted((root / folder).rglob("__init__.py")):
            package = init.parent
            if package.name == "versions" or "__pycache__" in package.parts:
                continue  # migration scripts are data for Alembic, not modules
            relative = package.relative_to(root)
            modules = sorted(p.stem for p in package.glob("*.py") if p.name != "__init__.py")
            dotted = "pagemind." + ".".join(relative.parts)
            shown = ", ".join(f"`{m}`" for m in modules) or "—"
            what = escape_cell(_summary(init)) or "—"
            lines.append(f"| `{dotted}` | `{relative}/` | {what} | {shown} |")
    return "\n".join(lines)
