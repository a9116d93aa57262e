"""Reading an agent definition: a YAML file or text into a validated `AgentSpec`, or a `SpecError` that names
the file, line and field of every problem.

The text is parsed twice: into data (a key given twice in one mapping is refused) and into YAML nodes, which
know their lines (`spec.yaml_locations`).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from pagemind.runtime.spec.agent import AgentSpec
from pagemind.runtime.spec.trust import REFUSED, Trust
from pagemind.runtime.spec.yaml_locations import located_problems


class SpecError(ValueError):
    """An agent definition that cannot be used; `str()` lists every problem as `file:line field: message`.
    `refused`: it names code its source may not (`spec.trust`)."""

    def __init__(self, problems: list[str], refused: bool = False):
        super().__init__("\n".join(problems))
        self.problems = problems
        self.refused = refused


class _UniqueKeyLoader(yaml.SafeLoader):
    """A SafeLoader that refuses a key given twice in one mapping (YAML's rule; PyYAML keeps the last silently, and
    a second `name:` would quietly change the agent's identity)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: dict[Any, int] = {}
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=deep)
            if isinstance(key, str) and key in seen:
                raise _DuplicateKey(key, seen[key], key_node.start_mark.line + 1)
            if isinstance(key, str):
                seen[key] = key_node.start_mark.line + 1
        return super().construct_mapping(node, deep)


class _DuplicateKey(Exception):
    def __init__(self, key: str, first: int, line: int):
        super().__init__(key)
        self.key, self.first, self.line = key, first, line


def _parse(path: Path, text: str) -> tuple[yaml.Node | None, Any]:
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
        return root, yaml.load(text, Loader=_UniqueKeyLoader)
    except yaml.MarkedYAMLError as exc:
        line = exc.problem_mark.line + 1 if exc.problem_mark else 1
        raise SpecError([f"{path}:{line} YAML syntax: {exc.problem or exc}"]) from None
    except _DuplicateKey as exc:
        raise SpecError(
            [
                f"{path}:{exc.line} {exc.key}: duplicate key '{exc.key}' (first at line {exc.first}); "
                "a key may appear once"
            ]
        ) from None
    except RecursionError:
        raise SpecError([f"{path}: YAML nested too deeply to be an agent definition"]) from None
    except yaml.YAMLError as exc:
        raise SpecError([f"{path}: not readable as YAML: {exc}"]) from None


def load_spec(path: str | Path) -> AgentSpec:
    """Read and validate an agent YAML file; raises SpecError naming file, line and field for every problem. A
    custom tool's module is looked for in the file's own folder first (`weather_tools:forecast` beside it)."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise SpecError([f"{path}: cannot read: {exc.strerror or exc}"]) from None
    except UnicodeDecodeError as exc:
        line = path.read_bytes()[: exc.start].count(b"\n") + 1
        raise SpecError(
            [
                f"{path}:{line} not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset {exc.start}); "
                "save the file as UTF-8"
            ]
        ) from None
    return parse_spec(text, path, tool_folder=path.parent.resolve())


def parse_spec(
    text: str,
    source: str | Path = "<agent>",
    *,
    import_tools: bool = True,
    trust: Trust | None = None,
    tool_folder: Path | None = None,
) -> AgentSpec:
    """Validate an agent definition given as YAML text (the API receives agents this way); errors name `source`,
    line and field. `trust` says where the text comes from (`spec.trust`): "client" refuses every reference to
    code (SpecError with `refused`), "shared" (or `import_tools=False`) checks them without importing anything.
    `tool_folder`: where custom tool modules are looked for first (`load_spec`: the file's folder; text that
    comes from no file the user named gets none)."""
    root, data = _parse(Path(source), text)
    if not isinstance(data, dict):
        raise SpecError([f"{source}:1 (top level): must be a mapping of fields (name, model, system, …)"])
    trust = trust or ("file" if import_tools else "shared")
    try:
        return AgentSpec.model_validate(
            data, context={"trust": trust, "source": str(source), "yaml": root, "tool_folder": tool_folder}
        )
    except ValidationError as exc:
        refused = any(e["type"] == REFUSED for e in exc.errors())
        raise SpecError(located_problems(Path(source), root, exc), refused=refused) from None
