"""Where in an agent's YAML a field is: the line of a field (spelled as the file spells it), and a validation
error as `file:line field: message` problems.

Every spec error and every warning about an old field name points at the line the user has to change; the YAML's
node tree (`yaml.compose`) is walked for it, since the parsed data no longer knows its lines.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError
from pydantic_core import ErrorDetails

from pagemind.runtime.spec.renames import written_locations

_PATH_IN_MESSAGE = re.compile(r"^((?:\w+)(?:\[\d+\])?(?:\.\w+(?:\[\d+\])?)*): (.*)$", re.S)
_PATH_PART = re.compile(r"(\w+)|\[(\d+)\]")


def _format_loc(loc: tuple[Any, ...]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _walk(root: yaml.Node | None, loc: tuple[Any, ...]) -> tuple[int, int, yaml.Node | None]:
    """How many parts of `loc` the YAML holds, the 1-based line of the deepest node reached, and that node."""
    node, line, depth = root, (root.start_mark.line + 1 if root is not None else 1), 0
    for part in loc:
        child = None
        if isinstance(node, yaml.MappingNode):
            for key_node, value_node in node.value:
                if key_node.value == part:
                    child = value_node if part != loc[-1] or isinstance(value_node, yaml.CollectionNode) else key_node
                    break
        elif isinstance(node, yaml.SequenceNode) and isinstance(part, int) and part < len(node.value):
            child = node.value[part]
        if child is None:
            break
        node, line, depth = child, child.start_mark.line + 1, depth + 1
    return depth, line, node


def _node_line(root: yaml.Node | None, loc: tuple[Any, ...]) -> int:
    """The 1-based line of the YAML node at `loc`, or of its nearest existing ancestor."""
    return _walk(root, loc)[1]


def key_line(root: yaml.Node | None, loc: tuple[Any, ...]) -> int:
    """The 1-based line of the key that names `loc` (a section's own line, not its first field's)."""
    depth, _, parent = _walk(root, loc[:-1])
    if depth == len(loc) - 1 and isinstance(parent, yaml.MappingNode):
        for key_node, _value in parent.value:
            if key_node.value == loc[-1]:
                return int(key_node.start_mark.line) + 1
    return _node_line(root, loc)


def _as_written(root: yaml.Node | None, loc: tuple[Any, ...]) -> tuple[Any, ...]:
    """`loc` as the file spells it: a file written with old names holds `memory.archival.prefetch` where
    validation says `memory.advanced.archival.candidates` (`spec.renames`); the spelling the file holds most of."""
    best, reached = loc, -1
    for candidate in written_locations(loc):
        depth = _walk(root, candidate)[0]
        if depth == len(candidate):
            return candidate
        if depth > reached:
            best, reached = candidate, depth
    return best


def _message(error: ErrorDetails) -> str:
    msg = error["msg"]
    msg = re.sub(r"^Value error, ", "", msg)
    if error["type"] == "extra_forbidden":
        return "unknown key"
    return re.sub(r"^Input should be ", "must be ", msg)


def located_problems(path: Path, root: yaml.Node | None, error: ValidationError) -> list[str]:
    """Each of `error`'s problems as `path:line field: message`, the field as the YAML `root` spells it."""
    problems = []
    for item in error.errors():
        loc = tuple(item["loc"])
        message = _message(item)
        embedded = _PATH_IN_MESSAGE.match(message)
        if embedded:  # a model-level check that names the field itself, e.g. a duplicate label
            loc += tuple(int(i) if i else n for n, i in _PATH_PART.findall(embedded.group(1)))
            message = embedded.group(2)
        loc = _as_written(root, loc)
        where = _format_loc(loc) or "(top level)"
        problems.append(f"{path}:{_node_line(root, loc)} {where}: {message}")
    return problems
