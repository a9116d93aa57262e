"""Pydantic models as reference tables: every field with its YAML path, type, default and description.

The models are walked generically (`model_fields`, nested `BaseModel` types reached through Optional, unions,
lists and dicts, `Literal` and `Annotated` unwrapped), never by field name: the spec is edited by people who should
not have to touch the docs for a new field to appear, and a field without a description is listed anyway, marked,
so the gap shows on the page instead of the field going missing.

Paths use the YAML's own spelling: a field's alias when it has one (`blocks[].schema`, not `schema_`), `[]` for the
items of a list (`schedule[].cron`) and `<key>` for the values of a mapping.
"""

from __future__ import annotations

import enum
import inspect
import json
import re
import sys
import types
import typing
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import PydanticUndefined, to_jsonable_python

MISSING = "*(no description in the model yet)*"
_SEQUENCES = (list, tuple, set, frozenset, Sequence)
_MAPPINGS = (dict, Mapping)
_CONSTRAINTS = (
    ("gt", "> {}"),
    ("ge", "≥ {}"),
    ("lt", "< {}"),
    ("le", "≤ {}"),
    ("multiple_of", "multiple of {}"),
    ("min_length", "length ≥ {}"),
    ("max_length", "length ≤ {}"),
    ("pattern", "matches `{}`"),
)


@dataclass
class Row:
    """One field as the reference shows it."""

    path: str
    type: str
    default: str
    description: str | None
    sections: list[tuple[str, type[BaseModel]]] = field(default_factory=list)  # models nested under this field


@dataclass
class Section:
    """One model at one place in the tree: its path (empty at the top), its docstring and its fields."""

    path: str
    model: type[BaseModel]
    rows: list[Row]

    @property
    def anchor(self) -> str:
        return anchor(self.path)


def anchor(path: str) -> str:
    """The heading id of a section (set explicitly: MkDocs' slugs would turn `blocks[]` and `blocks` into one)."""
    return re.sub(r"[^a-z0-9]+", "-", path.lower()).strip("-") or "top-level"


def yaml_key(name: str, info: FieldInfo) -> str:
    """The key a YAML file writes for a field: its alias when it has one."""
    if isinstance(info.validation_alias, str):
        return info.validation_alias
    return info.alias or name


def resolve(annotation: Any, owner: type) -> Any:
    """`annotation` with forward references evaluated in the owner's module (pydantic keeps a reference to a class
    defined further down the module unevaluated in `model_fields`)."""
    if isinstance(annotation, str):
        annotation = typing.ForwardRef(annotation)
    if isinstance(annotation, typing.ForwardRef):
        namespace = vars(sys.modules[owner.__module__])
        return resolve(eval(annotation.__forward_arg__, namespace), owner)  # the project's own annotations
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Annotated:
        return resolve(args[0], owner)
    if args and origin is not typing.Literal:
        resolved = tuple(resolve(a, owner) for a in args)
        if resolved != args:
            if origin in (typing.Union, types.UnionType):
                return typing.Union[resolved]  # noqa: UP007 - a union built from a tuple of types
            return origin[resolved]
    return annotation


def is_model(annotation: Any) -> bool:
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def nested(annotation: Any, path: str) -> list[tuple[str, type[BaseModel]]]:
    """The models a field's values can be, each with the path its fields hang under."""
    if is_model(annotation):
        return [(path, annotation)]
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin in (typing.Union, types.UnionType):
        return [found for arg in args for found in nested(arg, path)]
    if _is(origin, _SEQUENCES) and args:
        return nested(args[0], f"{path}[]")
    if _is(origin, _MAPPINGS) and len(args) == 2:
        return nested(args[1], f"{path}.<key>")
    return []


def _is(origin: Any, kinds: tuple[type, ...]) -> bool:
    return isinstance(origin, type) and issubclass(origin, kinds)


def type_text(annotation: Any) -> str:
    """A type as a YAML writer reads it: `float`, `str | null`, `list[str]`, `"once" | "skip"`, a model's name."""
    if annotation is type(None) or annotation is None:
        return "null"
    if annotation is Any:
        return "any"
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Literal:
        return " | ".join(json.dumps(to_jsonable_python(a), ensure_ascii=False) for a in args)
    if origin in (typing.Union, types.UnionType):
        ordered = [a for a in args if a is not type(None)] + [a for a in args if a is type(None)]
        return " | ".join(type_text(a) for a in ordered)
    if _is(origin, _MAPPINGS):
        return f"dict[{', '.join(type_text(a) for a in args)}]" if args else "dict"
    if _is(origin, _SEQUENCES):
        inner = ", ".join("…" if a is Ellipsis else type_text(a) for a in args)
        return f"list[{inner}]" if inner else "list"
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return " | ".join(json.dumps(m.value) for m in annotation)
    if isinstance(annotation, type) and issubclass(annotation, PurePath):
        return "path"
    return getattr(annotation, "__name__", None) or str(annotation)


def constraints(info: FieldInfo) -> list[str]:
    """The bounds and patterns pydantic checks (`Field(gt=0, le=1)`, `pattern=`), in reading order."""
    found = []
    for item in info.metadata:
        for attribute, template in _CONSTRAINTS:
            value = getattr(item, attribute, None)
            if value is not None:
                found.append(template.format(value))
    return found


def default_text(info: FieldInfo) -> str:
    """The default as it would be written in YAML (`required` when there is none)."""
    if info.is_required():
        return "required"
    try:
        value = info.get_default(call_default_factory=True)
    except TypeError:  # a factory that takes the validated data: its value depends on the other fields
        return "computed from the other fields"
    if isinstance(value, BaseModel):
        return "see its section"
    if value is PydanticUndefined:
        return "required"
    jsonable = to_jsonable_python(value, by_alias=True)
    return f"`{json.dumps(jsonable, ensure_ascii=False)}`"


def rows(model: type[BaseModel], prefix: str = "") -> list[Row]:
    """Every field of `model` (inherited ones included), with paths under `prefix`."""
    found = []
    for name, info in model.model_fields.items():
        annotation = resolve(info.annotation, model)
        path = f"{prefix}.{yaml_key(name, info)}" if prefix else yaml_key(name, info)
        bounds = constraints(info)
        shown = f"`{type_text(annotation)}`" + (f" ({', '.join(bounds)})" if bounds else "")
        found.append(Row(path, shown, default_text(info), info.description, nested(annotation, path)))
    return found


def sections(model: type[BaseModel], prefix: str = "", _seen: tuple[type, ...] = ()) -> Iterator[Section]:
    """`model` and every model under it, depth first in field order (so the page reads as the YAML does)."""
    here = Section(prefix, model, rows(model, prefix))
    yield here
    for row in here.rows:
        for path, inner in row.sections:
            if inner not in _seen + (model,):  # a recursive model is shown once, at its first place
                yield from sections(inner, path, _seen + (model,))


def docstring(model: type[BaseModel]) -> str:
    """The model's own docstring (not one inherited from a base class, BaseModel's included)."""
    own = model.__dict__.get("__doc__")
    return inspect.cleandoc(own) if isinstance(own, str) else ""


def escape_cell(text: str) -> str:
    """Text for a Markdown table cell: one line, pipes escaped outside code spans (inside them a backslash would
    show, and Python-Markdown does not split cells there anyway)."""
    parts = re.split(r"(`+[^`]*`+)", " ".join(text.split()))
    return "".join(p if p.startswith("`") else p.replace("|", r"\|") for p in parts)


def first_sentence(text: str) -> str:
    match = re.match(r"(.+?[.!?])(?=\s+[A-Z(`]|\s*$)", " ".join(text.split()))
    return match.group(1) if match else " ".join(text.split())


def description_cell(row: Row) -> str:
    """The field's description; for a section, its model's first sentence when the field has none; else marked."""
    links = ", ".join(f"[{path}](#{anchor(path)})" for path, _ in row.sections)
    if row.description:
        text = escape_cell(row.description)
    elif row.sections and docstring(row.sections[0][1]):
        text = escape_cell(first_sentence(docstring(row.sections[0][1])))
    else:
        text = MISSING
    if not links:
        return text
    return f"{text}{'' if text.endswith(('.', '!', '?', ')*')) else '.'} Section: {links}."


def table(found: list[Row]) -> list[str]:
    lines = ["| YAML path | type | default | description |", "| --- | --- | --- | --- |"]
    lines += [f"| `{r.path}` | {r.type} | {r.default} | {description_cell(r)} |" for r in found]
    return lines


def reference(model: type[BaseModel], *, top_title: str = "Top level", level: int = 2) -> str:
    """The whole reference for `model`: a line of coverage, then one heading and table per section."""
    every = list(sections(model))
    fields = [r for s in every for r in s.rows]
    undocumented = [r.path for r in fields if not r.description and not r.sections]
    lines = [
        f"{len(fields)} fields in {len(every)} sections; "
        + (f"{len(undocumented)} have no description yet (marked below)." if undocumented else "all described."),
        "",
    ]
    hashes = "#" * level
    for section in every:
        title = f"`{section.path}`" if section.path else top_title
        lines += [f"{hashes} {title} {{ #{section.anchor} }}", ""]
        text = docstring(section.model)
        if text:
            lines += [text, ""]
        lines += table(section.rows) + [""]
    return "\n".join(lines)


def flat_table(model: type[BaseModel], prefix: str = "") -> str:
    """One model's fields as a single table (for small configuration objects such as `DaemonConfig`)."""
    return "\n".join(table(rows(model, prefix)))
