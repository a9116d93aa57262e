"""The `@tool` decorator: one declaration gives the implementation, its argument model and its OpenAI schema."""

from __future__ import annotations

import inspect
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, get_type_hints, overload

from pydantic import BaseModel, ConfigDict, Field, create_model

from pagemind.tools.context import ToolContext

_ARGS_HEADER = re.compile(r"^\s*(Args|Arguments|Parameters):\s*$")
_SECTION_HEADER = re.compile(r"^\s*(Returns|Raises|Yields|Examples?|Notes?):\s*$")
_ARG_LINE = re.compile(r"^\s*(\*{0,2}\w+)\s*(\([^)]*\))?\s*:\s*(.*)$")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """Split a Google-style docstring into its description and a map of parameter descriptions."""
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    description: list[str] = []
    params: dict[str, str] = {}
    section = "description"
    current: str | None = None
    for line in lines:
        if _ARGS_HEADER.match(line):
            section, current = "args", None
        elif _SECTION_HEADER.match(line):
            section, current = "other", None
        elif section == "description":
            description.append(line)
        elif section == "args":
            match = _ARG_LINE.match(line)
            if match and not line.startswith("        "):
                current = match.group(1).lstrip("*")
                params[current] = match.group(3).strip()
            elif current and line.strip():
                params[current] = f"{params[current]} {line.strip()}".strip()
    return "\n".join(description).strip(), params


@dataclass(frozen=True)
class Tool:
    """A function the model can call: its schema, its argument model and how to run it."""

    name: str
    description: str
    function: Callable[..., Any]
    args_model: type[BaseModel]
    context_param: str | None
    terminal: bool
    read_only: bool
    schema: dict[str, Any]
    commits_with_step: bool = False

    @property
    def effects_in_step(self) -> bool:
        """Whether all this tool changes is stored by its step's commit (or it changes nothing): a step that calls
        only such tools may be held and committed with the turn's next step (`runtime.loop`)."""
        return self.read_only or self.commits_with_step

    @property
    def is_async(self) -> bool:
        """Whether the implementation is a coroutine function."""
        return inspect.iscoroutinefunction(self.function)

    def openai_schema(self) -> dict[str, Any]:
        """The `tools` entry for the OpenAI chat completions API (built once, at decoration: it is on the hot path)."""
        return self.schema

    async def invoke(self, arguments: BaseModel, context: ToolContext | None) -> Any:
        """Run the tool with already validated arguments."""
        kwargs = {name: getattr(arguments, name) for name in type(arguments).model_fields}
        if self.context_param:
            kwargs[self.context_param] = context
        result = self.function(**kwargs)
        if inspect.isawaitable(result):
            result = await result
        return result

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Call the implementation directly, as the plain function it is."""
        return self.function(*args, **kwargs)


def _function_schema(name: str, description: str, args_model: type[BaseModel]) -> dict[str, Any]:
    """The tool's schema as the model reads it, in as few tokens as say the same: every request carries every
    tool's schema. An optional parameter (`X | None = None`) is shown as its type alone, outside `required`: the
    model leaves it out rather than send null. Extra arguments are refused by the arguments' model (a tool error
    the model reads), so `additionalProperties` is not spelled out."""
    parameters = args_model.model_json_schema()
    for key in ("title", "additionalProperties"):
        parameters.pop(key, None)
    parameters["properties"] = {key: _compact(prop) for key, prop in parameters.get("properties", {}).items()}
    return {"type": "function", "function": {"name": name, "description": description, "parameters": parameters}}


def _compact(prop: dict[str, Any]) -> dict[str, Any]:
    # A default is the tool's business (the docstring says it where the model should know it).
    prop = {key: value for key, value in prop.items() if key not in ("title", "default") or value is None}
    options = prop.get("anyOf")
    others = [option for option in options if option != {"type": "null"}] if isinstance(options, list) else []
    if prop.get("default", ...) is None and len(others) == 1 and len(others) < len(options or []):
        prop = {**{k: v for k, v in prop.items() if k not in ("anyOf", "default")}, **others[0]}
    return prop


def _is_context_annotation(annotation: Any) -> bool:
    # A concrete class that declares itself a ToolContext (subclassing the protocol) counts too.
    return annotation is ToolContext or (isinstance(annotation, type) and ToolContext in annotation.__mro__)


def _build_args_model(function: Callable[..., Any], param_docs: dict[str, str]) -> tuple[type[BaseModel], str | None]:
    hints = get_type_hints(function, include_extras=True)  # keep Annotated validators (core_memory_update)
    fields: dict[str, Any] = {}
    context_param: str | None = None
    for name, param in inspect.signature(function).parameters.items():
        annotation = hints.get(name, Any)
        if _is_context_annotation(annotation):
            context_param = name
            continue
        default = ... if param.default is inspect.Parameter.empty else param.default
        fields[name] = (annotation, Field(default, description=param_docs.get(name)))
    model_name = "".join(part.title() for part in function.__name__.split("_")) + "Args"
    model = create_model(model_name, __config__=ConfigDict(extra="forbid"), **fields)
    return model, context_param


@overload
def tool(
    function: Callable[..., Any],
    *,
    name: str | None = None,
    terminal: bool = False,
    read_only: bool = False,
    commits_with_step: bool = False,
) -> Tool: ...


@overload
def tool(
    function: None = None,
    *,
    name: str | None = None,
    terminal: bool = False,
    read_only: bool = False,
    commits_with_step: bool = False,
) -> Callable[[Callable[..., Any]], Tool]: ...


def tool(
    function: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    terminal: bool = False,
    read_only: bool = False,
    commits_with_step: bool = False,
) -> Tool | Callable[[Callable[..., Any]], Tool]:
    """Turn a typed, documented function into a `Tool`.

    The schema comes from the signature (pydantic) and the docstring (description; `Args:` gives each
    parameter's description). A parameter annotated `ToolContext` receives the agent's context and stays out
    of the schema. `terminal=True` marks a tool whose success ends the turn; `read_only=True` lets dispatch
    run it concurrently with other read-only calls. `commits_with_step=True` marks a tool whose only effects are
    edits of the core memory in its `ToolContext`, which its step's commit stores (a crash before that commit
    undoes them, and the step is redone).
    """

    def wrap(fn: Callable[..., Any]) -> Tool:
        description, param_docs = parse_docstring(fn.__doc__)
        if not description:
            raise TypeError(f"tool {fn.__name__} needs a docstring: the model reads it")
        args_model, context_param = _build_args_model(fn, param_docs)
        tool_name = name or fn.__name__
        schema = _function_schema(tool_name, description, args_model)
        return Tool(
            tool_name, description, fn, args_model, context_param, terminal, read_only, schema, commits_with_step
        )

    return wrap(function) if function is not None else wrap
