"""The daemon's HTTP API as Markdown, from the OpenAPI document FastAPI builds for `create_app`.

The document is what `GET /openapi.json` serves, so the page and the running daemon describe the same routes.
Building it needs an app, and the app a `Daemon`; one over a fresh SQLite file in a temporary folder is enough
(nothing starts: no event loop, no model, no vector store; the OpenAPI document depends only on the routes).

One gap in the app's own document is filled here: a route that declares its request body by hand (`POST
/v1/agents`, which takes JSON or YAML) refers to a schema FastAPI never registered; `complete_references` adds it
from the pydantic model of that name, so the page can describe the body.
"""

from __future__ import annotations

import json
import sys
import tempfile
from collections.abc import Container, Iterator
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from docgen.models import anchor, escape_cell

COMPONENTS = "#/components/schemas/"


def openapi_document() -> dict[str, Any]:
    """The OpenAPI document of the app `pagemind serve` runs."""
    from pagemind.runtime.process.settings import Settings
    from pagemind.runtime.state.store import StateStore
    from pagemind.scheduler.api.app import create_app
    from pagemind.scheduler.catalog import AgentCatalog
    from pagemind.scheduler.daemon import Daemon

    with tempfile.TemporaryDirectory(prefix="pagemind-docs-") as folder:
        root = Path(folder)
        (root / "agents").mkdir()
        url = f"sqlite:///{root / 'pagemind.db'}"
        store = StateStore.open(url)
        try:
            daemon = Daemon(AgentCatalog(root / "agents", store), Settings(home=root, database_url=url))
            app = create_app(daemon)
            document = app.openapi()
        finally:
            store.engine.dispose()
    # The routes' modules are the app's package (FastAPI's own route objects differ between its versions).
    package = create_app.__module__.rpartition(".")[0] + "."
    namespaces = [vars(m) for name, m in sorted(sys.modules.items()) if name.startswith(package) and m is not None]
    complete_references(document, namespaces)
    return document


def _references(node: Any) -> Iterator[str]:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(COMPONENTS):
            yield ref.removeprefix(COMPONENTS)
        for value in node.values():
            yield from _references(value)
    elif isinstance(node, list):
        for value in node:
            yield from _references(value)


def complete_references(document: dict[str, Any], namespaces: list[dict[str, Any]]) -> list[str]:
    """Add the schemas a `$ref` names but `components` lacks, from the pydantic model of that name in the API's
    modules. A route that writes its request body by hand (`openapi_extra`, to accept JSON or YAML) refers to a
    model FastAPI never saw, so the app's own document has the reference and not the schema. Returns the names
    added; a name no module defines is left as it is (the page shows it unlinked)."""
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    added = []
    for name in sorted(set(_references(document)) - schemas.keys()):
        model = next((ns[name] for ns in namespaces if isinstance(ns.get(name), type)), None)
        if model is None or not issubclass(model, BaseModel):
            continue
        schema = model.model_json_schema(ref_template=COMPONENTS + "{model}")
        for inner, definition in schema.pop("$defs", {}).items():
            schemas.setdefault(inner, definition)
        schemas[name] = schema
        added.append(name)
    return added


def schema_anchor(name: str) -> str:
    return f"schema-{name.lower()}"


def schema_type(schema: dict[str, Any], known: Container[str]) -> str:
    """A JSON Schema as a short Markdown phrase: `string`, `integer (> 0)`, a link to a named schema (one of
    `known`), `list of …`."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{schema_anchor(name)})" if name in known else f"`{name}` (not in the document)"
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            return " or ".join(schema_type(s, known) for s in schema[key])
    if "const" in schema:
        return f"`{json.dumps(schema['const'])}`"
    if "enum" in schema:
        return " or ".join(f"`{json.dumps(v)}`" for v in schema["enum"])
    kind = schema.get("type", "any")
    if kind == "array":
        text = f"list of {schema_type(schema.get('items', {}), known)}"
    elif kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        text = f"map of string to {schema_type(schema['additionalProperties'], known)}"
    else:
        text = f"`{kind}`" + (f" ({schema['format']})" if "format" in schema else "")
    bounds = [
        template.format(schema[key])
        for key, template in (
            ("exclusiveMinimum", "> {}"),
            ("minimum", "≥ {}"),
            ("exclusiveMaximum", "< {}"),
            ("maximum", "≤ {}"),
            ("minLength", "length ≥ {}"),
            ("maxLength", "length ≤ {}"),
            ("minItems", "items ≥ {}"),
            ("maxItems", "items ≤ {}"),
        )
        if key in schema
    ]
    return text + (f" ({', '.join(bounds)})" if bounds else "")


def _described(text: str | None) -> str:
    return escape_cell(text) if text else "—"


def _operation(method: str, path: str, op: dict[str, Any], known: Container[str]) -> list[str]:
    lines = [f"### `{method.upper()} {path}` {{ #{anchor(f'{method} {path}')} }}", ""]
    if op.get("summary"):
        lines += [f"**{op['summary'][0].upper()}{op['summary'][1:]}.**", ""]
    if op.get("description"):
        lines += [op["description"], ""]
    if op.get("x-admin-only"):
        lines += ["`x-admin-only`: the admin token or a key of scope admin; 403 `admin_only` to every user key.", ""]
    parameters = op.get("parameters", [])
    if parameters:
        lines += ["| parameter | in | type | required | description |", "| --- | --- | --- | --- | --- |"]
        for p in parameters:
            schema = p.get("schema", {})
            default = f" (default `{json.dumps(schema['default'])}`)" if "default" in schema else ""
            lines.append(
                f"| `{p['name']}` | {p['in']} | {schema_type(schema, known)} | {'yes' if p.get('required') else 'no'} "
                f"| {_described(p.get('description'))}{default} |"
            )
        lines.append("")
    body = op.get("requestBody")
    if body:
        kinds = [f"`{kind}`: {schema_type(c.get('schema', {}), known)}" for kind, c in body.get("content", {}).items()]
        lines += [f"Request body{' (required)' if body.get('required') else ''}: {'; '.join(kinds)}.", ""]
    lines += ["| status | meaning | body |", "| --- | --- | --- |"]
    for status, response in sorted(op.get("responses", {}).items()):
        content = response.get("content", {})
        shown = "; ".join(f"`{kind}`: {schema_type(c.get('schema', {}), known)}" for kind, c in content.items()) or "—"
        lines.append(f"| {status} | {_described(response.get('description'))} | {shown} |")
    return lines + [""]


def _schema(name: str, schema: dict[str, Any], known: Container[str]) -> list[str]:
    lines = [f"### {name} {{ #{schema_anchor(name)} }}", ""]
    if schema.get("description"):
        lines += [schema["description"], ""]
    properties = schema.get("properties", {})
    if not properties:
        return lines + [f"Type: {schema_type(schema, known)}.", ""]
    required = set(schema.get("required", []))
    lines += ["| field | type | required | default | description |", "| --- | --- | --- | --- | --- |"]
    for field, prop in properties.items():
        default = f"`{json.dumps(prop['default'], ensure_ascii=False)}`" if "default" in prop else "—"
        lines.append(
            f"| `{field}` | {schema_type(prop, known)} | {'yes' if field in required else 'no'} | {default} "
            f"| {_described(prop.get('description'))} |"
        )
    if schema.get("additionalProperties") is False:
        lines += ["", "Other fields are refused (422)."]
    return lines + [""]


def reference(document: dict[str, Any] | None = None) -> str:
    """Every route, grouped by tag in the order the app declares them, then every body schema."""
    document = document or openapi_document()
    known = document.get("components", {}).get("schemas", {})
    by_tag: dict[str, list[tuple[str, str, dict[str, Any]]]] = {}
    for path, operations in document["paths"].items():
        for method, op in operations.items():
            by_tag.setdefault((op.get("tags") or ["other"])[0], []).append((method, path, op))
    lines = [
        f"OpenAPI {document.get('openapi', '')}, `{document['info']['title']}` version {document['info']['version']}.",
        "",
    ]
    for tag, operations in by_tag.items():
        lines += [f"## {tag}", ""]
        for method, path, op in operations:
            lines += _operation(method, path, op, known)
    lines += ["## Schemas", ""]
    for name, schema in known.items():
        lines += _schema(name, schema, known)
    return "\n".join(lines)
