"""The docs: the site builds in strict mode and offline, the README stays short and keeps its two commands, and no
page names a spec field, a YAML key, a module or a file that is not there (the pages are read as written, so a
rename in the code fails here until the docs follow).

The agent YAML reference is generated from the spec models at build time (docs/hooks.py); the model is walked
again here, independently of the generator, so a generator that skips a kind of field fails too.
"""

from __future__ import annotations

import html
import importlib
import os
import re
import subprocess
import sys
import typing
from collections.abc import Iterator
from pathlib import Path
from types import UnionType
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from pagemind.runtime.spec.agent import AgentSpec

ROOT = Path(__file__).parents[2]
DOCS = ROOT / "docs"
PAGES = DOCS / "pages"
MKDOCS = Path(sys.executable).parent / "mkdocs"
README = ROOT / "README.md"
MAX_README_LINES = 250
# The README's two commands, verbatim: CI runs the second (.ci/run).
SETUP_COMMAND = "python3 -m venv .venv && .venv/bin/pip install -q -e . && .venv/bin/pagemind demo"
TEST_COMMAND = "python3 -m venv .venv && .venv/bin/pip install -q -e '.[test]' && .venv/bin/python -m pytest -q"

FENCE = re.compile(r"^```(\w*)[^\n]*\n(.*?)^```\s*$", re.M | re.S)
FILE_PATH = re.compile(r"(?<![\w./$~-])((?:runtime|scheduler|tools|blocks|bench|tests|scripts|agents|docs)/[\w./*-]*)")
DOTTED = re.compile(r"(?<![\w.])pagemind\.(?:runtime|tools|blocks|scheduler)(?:\.\w+)*(?::\w+)?")
YAML_PATH = re.compile(r"`((?:memory|model|blocks|schedule|idle)(?:\[\])?(?:\.\w+(?:\[\])?)+)`")
PACKAGES = {"runtime", "tools", "blocks", "scheduler"}
# A fragment in a page (a `memory:` section, say) is checked as part of the smallest agent there is.
BASE_AGENT = {"name": "example", "model": {"name": "gpt-4o-mini"}, "system": "Reply with send_message."}


def documents() -> list[Path]:
    return [README, *sorted(PAGES.rglob("*.md"))]


# -- the spec, walked for its YAML paths ----------------------------------------------------------------------------


def _models_under(annotation: Any, path: str) -> Iterator[tuple[str, type[BaseModel]]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        yield path, annotation
        return
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        yield from _models_under(args[0], path)
    elif origin in (typing.Union, UnionType):
        for arg in args:
            yield from _models_under(arg, path)
    elif origin in (list, tuple, set, frozenset) and args:
        yield from _models_under(args[0], f"{path}[]")
    elif origin is dict and len(args) == 2:
        yield from _models_under(args[1], f"{path}.<key>")


def spec_paths(model: type[BaseModel] = AgentSpec, prefix: str = "", seen: tuple[type, ...] = ()) -> dict[str, bool]:
    """Every field's YAML path → whether a model's fields hang under it (a section: `memory`, `blocks[]`)."""
    try:
        hints = typing.get_type_hints(model)  # resolves the forward references pydantic leaves in model_fields
    except Exception:
        hints = {}
    found: dict[str, bool] = {}
    for name, info in model.model_fields.items():
        key = info.validation_alias if isinstance(info.validation_alias, str) else info.alias or name
        path = f"{prefix}.{key}" if prefix else key
        found.setdefault(path, False)
        for inner_path, inner in _models_under(hints.get(name, info.annotation), path):
            found[inner_path] = True
            if inner not in seen:
                for inner_field, is_section in spec_paths(inner, inner_path, (*seen, model)).items():
                    found[inner_field] = found.get(inner_field, False) or is_section
    return found


# -- the site -------------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    built = subprocess.run(
        [str(MKDOCS), "build", "--strict", "-f", str(DOCS / "mkdocs.yml"), "--site-dir", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-5000:]
    return out


def test_the_site_builds_strictly_and_loads_nothing_from_the_network(site: Path):
    pages = list(site.rglob("*.html"))
    assert (site / "index.html").is_file() and len(pages) > 10
    remote = re.compile(r"<(?:link|script|img)\b[^>]*\b(?:href|src)=\"(?:https?:)?//", re.I)
    fetching = [str(p.relative_to(site)) for p in pages if remote.search(p.read_text(encoding="utf-8"))]
    assert not fetching, f"pages load assets from the network (fonts? a plugin?): {fetching}"


def test_the_yaml_reference_lists_every_field_of_the_spec(site: Path):
    page = html.unescape((site / "reference" / "yaml" / "index.html").read_text(encoding="utf-8"))
    missing = [path for path in spec_paths() if f"<code>{path}</code>" not in page]
    assert not missing, "the YAML reference does not list: " + ", ".join(missing)


def test_the_generated_pages_are_filled_in(site: Path):
    for page in ("reference/yaml", "reference/http-api", "reference/cli", "reference/environment", "internals"):
        text = (site / page / "index.html").read_text(encoding="utf-8")
        assert "generated:" not in text, f"{page}: a placeholder was left in"
    api = (site / "reference" / "http-api" / "index.html").read_text(encoding="utf-8")
    assert "POST /v1/agents/{name}/messages" in html.unescape(api)
    cli = (site / "reference" / "cli" / "index.html").read_text(encoding="utf-8")
    assert "pagemind serve" in cli and "pagemind memory search" in cli


# -- the README -----------------------------------------------------------------------------------------------------


def test_the_readme_is_short_and_keeps_its_two_commands_in_their_own_blocks():
    text = README.read_text(encoding="utf-8")
    assert len(text.splitlines()) <= MAX_README_LINES
    blocks = [body.strip() for _, body in FENCE.findall(text)]
    assert SETUP_COMMAND in blocks
    assert TEST_COMMAND in blocks


# -- what the pages name --------------------------------------------------------------------------------------------


def _module_of(parts: list[str]) -> tuple[str, list[str]] | None:
    """The longest prefix of `pagemind.x.y.z` that is a module or package in the tree, and the names after it."""
    for end in range(len(parts), 1, -1):
        where = ROOT.joinpath(*parts[1:end])
        if where.with_suffix(".py").is_file() or (where / "__init__.py").is_file():
            return ".".join(parts[:end]), parts[end:]
    return None


def test_every_module_and_file_the_docs_name_exists():
    problems = []
    for document in documents():
        text = document.read_text(encoding="utf-8")
        name = document.relative_to(ROOT)
        for path in FILE_PATH.findall(text):
            path = path.split("*")[0].rstrip(".")
            if not (ROOT / path).exists():
                problems.append(f"{name}: {path} does not exist")
        for dotted in DOTTED.findall(text):
            module_path, _, attribute = dotted.partition(":")
            found = _module_of(module_path.split("."))
            if found is None:
                problems.append(f"{name}: {dotted}: no such module")
                continue
            target: Any = importlib.import_module(found[0])
            for part in [*found[1], *([attribute] if attribute else [])]:
                if not hasattr(target, part):
                    problems.append(f"{name}: {dotted}: {found[0]} has no {part!r}")
                    break
                target = getattr(target, part)
    assert not problems, "\n".join(problems)


def test_every_yaml_key_the_docs_name_is_a_field_of_the_spec():
    known = spec_paths()
    named = {(doc.relative_to(ROOT), path) for doc in documents() for path in YAML_PATH.findall(doc.read_text())}
    unknown = sorted(f"{doc}: `{path}`" for doc, path in named if path not in known)
    assert not unknown, "not keys of the spec:\n" + "\n".join(unknown)


def _deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in extra.items():
        merged[key] = (
            _deep_merge(merged[key], value) if isinstance(value, dict) and isinstance(merged.get(key), dict) else value
        )
    return merged


def _keys(data: dict[str, Any], sections: dict[str, bool], prefix: str = "") -> Iterator[str]:
    """The YAML paths an example writes, descending only into sections (a block's `value` may be a mapping)."""
    for key, value in data.items():
        path = f"{prefix}.{key}" if prefix else key
        yield path
        if isinstance(value, dict) and sections.get(path):
            yield from _keys(value, sections, path)
        elif isinstance(value, list) and sections.get(f"{path}[]"):
            for item in value:
                if isinstance(item, dict):
                    yield from _keys(item, sections, f"{path}[]")


def test_every_yaml_example_in_the_docs_is_a_valid_agent_in_current_keys():
    # Old key names still load (with a warning), so validation alone would pass an outdated example: its keys are
    # also checked against the spec's current paths.
    sections = spec_paths()
    problems = []
    for document in documents():
        for language, body in FENCE.findall(document.read_text(encoding="utf-8")):
            if language != "yaml":
                continue
            where = f"{document.relative_to(ROOT)}: yaml block starting {body.splitlines()[0]!r}"
            data = yaml.safe_load(body)
            if not isinstance(data, dict):
                problems.append(f"{where}: not a mapping")
                continue
            agent = data if "name" in data else _deep_merge(BASE_AGENT, data)
            unknown = [p for p in _keys(agent, sections) if p not in sections]
            problems += [f"{where}: `{p}` is not a key of the spec" for p in unknown]
            try:
                AgentSpec.model_validate(agent, context={"import_tools": False})
            except Exception as exc:  # the message names the field
                problems.append(f"{where}: {exc}")
    assert not problems, "\n".join(problems)
