"""MkDocs hooks: the pages that describe code are generated from it when the site is built, so they cannot drift.

A page asks for a generated part with a placeholder line, `<!-- generated: NAME -->`, replaced in
`on_page_markdown` by what the generator of that name returns (see `docgen/`). An unknown name, a generator that
fails, or the environment page disagreeing with the source is logged as a warning, which fails
`mkdocs build --strict` (the docs test runs that).

Two repository files are pages of the site without being copied into `pages/`: `ARCHITECTURE.md` and
`bench/RESULTS.md` are added in `on_files` from where they live, so the docs link to them and never restate them.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from docgen import environment, http_api, models, project
from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parent.parent
INCLUDED = {"internals/architecture.md": ROOT / "ARCHITECTURE.md", "internals/results.md": ROOT / "bench/RESULTS.md"}
PLACEHOLDER = re.compile(r"^<!-- generated: ([\w-]+) -->$", re.M)
log = logging.getLogger("mkdocs.hooks.pagemind")


def _agent_spec() -> str:
    from pagemind.runtime.spec.agent import AgentSpec

    return models.reference(AgentSpec)


def _presets() -> str:
    """The tuning presets (`memory.retrieval`) and the values each gives `memory.advanced`."""
    from pagemind.runtime.spec.presets import PRESETS

    lines = ["| `memory.retrieval` | for | values it gives |", "| --- | --- | --- |"]
    for name, preset in PRESETS.items():
        values = [
            f"`memory.advanced.{section.name}.{key}`: `{value}`"
            for section in dataclasses.fields(preset)
            if isinstance(getattr(preset, section.name), Mapping)
            for key, value in getattr(preset, section.name).items()
        ]
        lines.append(f"| `{name}` | {models.escape_cell(preset.description)} | {'; '.join(values) or 'none'} |")
    return "\n".join(lines)


def _renames() -> str:
    """The keys renamed when `memory:` got its tiers, still read (with a warning)."""
    from pagemind.runtime.spec.renames import RENAMED

    lines = ["| old key | read as |", "| --- | --- |"]
    lines += [f"| `{old}` | `{new}` |" for old, new in RENAMED]
    return "\n".join(lines)


def _daemon_config() -> str:
    from pagemind.scheduler.daemon_config import DaemonConfig

    return models.flat_table(DaemonConfig)


def _environment(markdown: str) -> str:
    found, variables = environment.scan(ROOT), environment.declared()
    for problem in environment.problems(markdown, found, variables):
        log.warning("environment.md: %s", problem)
    return environment.settings_table(variables, found)


# Each takes the page's Markdown (the environment page is checked against it) and returns the generated part.
GENERATORS: dict[str, Callable[[str], str]] = {
    "agent-spec": lambda _: _agent_spec(),
    "presets": lambda _: _presets(),
    "renames": lambda _: _renames(),
    "daemon-config": lambda _: _daemon_config(),
    "http-api": lambda _: http_api.reference(),
    "environment": _environment,
    "environment-others": lambda _: environment.others_table(environment.declared()),
    "environment-around": lambda _: environment.around_table(environment.scan(ROOT)),
    "cli": lambda _: project.cli_reference(),
    "layers": lambda _: project.layers(ROOT),
    "package-map": lambda _: project.package_map(ROOT),
}


def on_files(files: Files, config: Any) -> Files:
    for uri, source in INCLUDED.items():
        text = source.read_text(encoding="utf-8")
        title, _, body = text.partition("\n") if text.startswith("# ") else ("", "", text)
        note = f"*This page is `{source.relative_to(ROOT)}` from the repository, included when the site is built.*"
        files.append(File.generated(config, uri, content=f"{title}\n\n{note}\n\n{body}"))
    return files


def on_page_markdown(markdown: str, page: Any, config: Any, files: Files) -> str:
    def generate(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in GENERATORS:
            log.warning("%s: no generator named %r (known: %s)", page.file.src_uri, name, ", ".join(GENERATORS))
            return match.group(0)
        try:
            return GENERATORS[name](markdown)
        except Exception as exc:  # reported, not raised: the build lists every failing page at once
            log.warning("%s: generating %r failed: %s: %s", page.file.src_uri, name, type(exc).__name__, exc)
            return match.group(0)

    return PLACEHOLDER.sub(generate, markdown)
