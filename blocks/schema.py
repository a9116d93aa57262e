"""Structured blocks: a schema a block's JSON value must satisfy, its checks, and how it reads in a prompt.

A schema comes from the agent YAML as an inline JSON Schema (checked by `jsonschema`) or as a
`package.module:Model` reference to a pydantic model (checked by pydantic; its `model_json_schema()` is what the
model is shown). Either way, a failure is reported as `path: what was expected`, the form a model can act on.
"""

from __future__ import annotations

import functools
import importlib
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from pagemind.blocks.patterns import check_patterns, validator_class

if TYPE_CHECKING:
    from jsonschema.protocols import Validator

# jsonschema (with referencing, rpds, attrs: ≈ 2 MB resident) is imported by the first inline schema: an agent whose
# blocks have none, or only pydantic models (the shipped ones), never loads it.

# A schema summary for the prompt stops describing nested shapes this deep (names only past it).
_SUMMARY_DEPTH = 2
_MAX_REPORTED = 3


def format_path(parts: Any) -> str:
    """`("people", "Leo", "relation")` → `people.Leo.relation`; list indexes as `[0]`; the root as `(top level)`."""
    text = ""
    for part in parts:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text or "(top level)"


def _check_references(node: Any, root: Mapping[str, Any], path: tuple[Any, ...]) -> None:
    """Raise ValueError, naming where, for a `$ref` that leaves the schema (a URL or another file: a schema is never
    fetched) or points at nothing in it; otherwise the first value checked against it would fail to resolve."""
    if isinstance(node, list):
        for index, item in enumerate(node):
            _check_references(item, root, (*path, index))
        return
    if not isinstance(node, Mapping):
        return
    for key, value in node.items():
        if key in ("$ref", "$dynamicRef") and isinstance(value, str):
            where = format_path((*path, key))
            if not value.startswith("#"):
                raise ValueError(
                    f"{where}: {value!r} is outside the schema; an inline schema may refer only to its own parts "
                    "('#/$defs/Name'), it is never fetched"
                )
            if value.startswith("#/") or value == "#":
                _resolve_pointer(root, value, where)
        _check_references(value, root, (*path, key))


def _resolve_pointer(root: Mapping[str, Any], reference: str, where: str) -> None:
    target: Any = root
    for raw in reference[2:].split("/") if reference != "#" else []:
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(target, Mapping) and part in target:
            target = target[part]
        elif isinstance(target, list) and part.isdigit() and int(part) < len(target):
            target = target[int(part)]
        else:
            raise ValueError(f"{where}: {reference!r} points at nothing in the schema")


@dataclass(frozen=True)
class BlockSchema:
    """The schema of a structured block. Equal schemas have equal `reference`s (the canonical text of an inline
    schema, or the `module:Model` reference), so a `Block` holding one stays hashable and comparable."""

    reference: str
    json_schema: dict[str, Any] = field(compare=False, repr=False)
    model: type[BaseModel] | None = field(default=None, compare=False, repr=False)

    @classmethod
    def inline(cls, schema: Mapping[str, Any]) -> BlockSchema:
        """An inline JSON Schema; raises ValueError if it is not a valid JSON Schema (2020-12)."""
        from jsonschema import Draft202012Validator, SchemaError

        schema = dict(schema)
        try:
            Draft202012Validator.check_schema(schema)
        except SchemaError as exc:
            raise ValueError(f"not a valid JSON Schema at {format_path(exc.absolute_path)}: {exc.message}") from None
        _check_references(schema, schema, ())
        check_patterns(schema)  # matched by RE2, in linear time: a posted pattern cannot stall the daemon
        return cls(json.dumps(schema, sort_keys=True, ensure_ascii=False), schema)

    @classmethod
    def from_model(cls, model: type[BaseModel], reference: str | None = None) -> BlockSchema:
        """A pydantic model's schema (validated by the model itself)."""
        return cls(reference or f"{model.__module__}:{model.__qualname__}", model.model_json_schema(), model)

    @classmethod
    def resolve(cls, reference: str) -> BlockSchema:
        """The pydantic model named `package.module:Model`, imported; raises ValueError saying what is wrong."""
        module_name, colon, attribute = reference.partition(":")
        if not (colon and module_name and attribute):
            raise ValueError(
                f"'{reference}' is not a schema reference: give an inline JSON Schema (a mapping) or "
                "'package.module:Model' naming a pydantic model"
            )
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:
            raise ValueError(
                f"cannot import module '{module_name}' for schema '{reference}': {type(exc).__name__}: {exc}"
            ) from None
        target = getattr(module, attribute, None)
        if not (isinstance(target, type) and issubclass(target, BaseModel)):
            what = "has no attribute" if target is None else "has no pydantic model"
            raise ValueError(f"module '{module_name}' {what} '{attribute}' (schema '{reference}')")
        return cls.from_model(target, reference)

    def problems(self, data: Any) -> list[str]:
        """Every way `data` breaks the schema, as `path: what was expected` (empty when it validates)."""
        if self.model is not None:
            try:
                self.model.model_validate(data)
            except ValidationError as exc:
                return [f"{format_path(e['loc'])}: {e['msg']}" for e in exc.errors()]
            return []
        errors = sorted(_validator(self.reference).iter_errors(data), key=lambda e: list(map(str, e.absolute_path)))
        return [f"{format_path(e.absolute_path)}: {e.message}" for e in errors]

    def fields(self) -> list[str]:
        """The top-level fields, when the schema describes an object (for error messages)."""
        return list(self.json_schema.get("properties", {}))

    @functools.cached_property
    def summary(self) -> str:
        """One line per top-level field, `name: shape — description`, for the prompt (computed once: every
        compile reads it)."""
        defs = self.json_schema.get("$defs", {})
        properties = self.json_schema.get("properties")
        if not properties:
            return _shape(self.json_schema, defs, 0)
        lines = []
        for name, prop in properties.items():
            referenced = defs.get(prop.get("$ref", "").rsplit("/", 1)[-1], {})
            description = prop.get("description") or referenced.get("description", "")
            lines.append(f"{name}: {_shape(prop, defs, 1)}" + (f" — {description}" if description else ""))
        return "\n".join(lines)

    def explain(self, problems: list[str]) -> str:
        """A refusal's detail: the first few problems and the fields the schema has."""
        shown = "; ".join(problems[:_MAX_REPORTED])
        more = f" (and {len(problems) - _MAX_REPORTED} more)" if len(problems) > _MAX_REPORTED else ""
        fields = self.fields()
        known = f" Its fields: {', '.join(fields)}." if fields else ""
        return f"{shown}{more}.{known}"


@functools.lru_cache(maxsize=256)
def _validator(reference: str) -> Validator:
    # Keyed by the canonical schema text: one compiled validator per distinct inline schema.
    return validator_class()(json.loads(reference))


def _shape(schema: dict[str, Any], defs: dict[str, Any], depth: int) -> str:
    """A short description of a schema's shape: `string`, `[string]`, `{key: string}`, `{a, b}`."""
    if "$ref" in schema:
        schema = defs.get(schema["$ref"].rsplit("/", 1)[-1], {})
    variants = schema.get("anyOf") or schema.get("oneOf")
    if variants:
        shapes = [_shape(v, defs, depth) for v in variants if v.get("type") != "null"]
        return " or ".join(dict.fromkeys(shapes)) or "null"
    if "pattern" in schema:
        return f"string matching {schema['pattern']}"
    kind = schema.get("type", "any")
    if kind == "array":
        return f"[{_shape(schema.get('items', {}), defs, depth + 1)}]"
    if kind != "object":
        return " or ".join(kind) if isinstance(kind, list) else str(kind)
    properties = schema.get("properties", {})
    extra = schema.get("additionalProperties")
    if properties:
        if depth >= _SUMMARY_DEPTH:
            return "{" + ", ".join(properties) + "}"
        inner = ", ".join(f"{k}: {_shape(v, defs, depth + 1)}" for k, v in properties.items())
        return "{" + inner + "}"
    if isinstance(extra, dict):
        return "{key: " + _shape(extra, defs, depth + 1) + "}"
    return "object"
