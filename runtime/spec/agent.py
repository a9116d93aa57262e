"""Agent definitions: YAML → a validated `AgentSpec`, with errors that name the file, line and field."""

from __future__ import annotations

import functools
import hashlib
import importlib
import json
import re
from pathlib import Path
from typing import Annotated, Any, ClassVar

import yaml
from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    ValidationInfo,
    model_validator,
)

from pagemind.blocks import Block, BlockSchema, dump_json
from pagemind.runtime.spec.memory import MemoryConfig
from pagemind.runtime.spec.triggers import IdleTrigger, ScheduleTrigger, check_unique
from pagemind.tools import BUILTIN_TOOLS, Tool, tool

# The tiktoken encodings shipped with the package (runtime/tokens.py loads them; a test checks the two agree).
SHIPPED_ENCODINGS = ("o200k_base", "cl100k_base")
DEFAULT_TOOLS = ["send_message", "core_memory_append", "core_memory_replace", "memory_rethink"]
_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$"


class SpecError(ValueError):
    """An agent definition that cannot be used; `str()` lists every problem as `file:line field: message`."""

    def __init__(self, problems: list[str]):
        super().__init__("\n".join(problems))
        self.problems = problems


def resolve_tool(reference: str) -> Tool:
    """A built-in tool by name, or a custom one by `package.module:function`; raises ValueError if neither."""
    if reference in BUILTIN_TOOLS:
        return BUILTIN_TOOLS[reference]
    if ":" not in reference:
        known = ", ".join(sorted(BUILTIN_TOOLS))
        raise ValueError(f"unknown tool '{reference}' (built-ins: {known}; custom tools: package.module:function)")
    module_name, _, attribute = reference.partition(":")
    try:
        module = importlib.import_module(module_name)
    except Exception as exc:
        raise ValueError(f"cannot import module '{module_name}' for tool '{reference}': {type(exc).__name__}: {exc}")
    target = getattr(module, attribute, None)
    if target is None:
        raise ValueError(f"module '{module_name}' has no attribute '{attribute}'")
    if isinstance(target, Tool):
        return target
    if callable(target):
        try:
            return tool(target)
        except TypeError as exc:
            raise ValueError(str(exc))
    raise ValueError(f"'{reference}' is not a function or a @tool")


def check_tool_syntax(reference: str) -> str:
    """A built-in tool's name or a `package.module:function` reference, checked without importing anything."""
    module_name, colon, attribute = reference.partition(":")
    if reference in BUILTIN_TOOLS or (colon and module_name and attribute):
        return reference
    known = ", ".join(sorted(BUILTIN_TOOLS))
    raise ValueError(f"unknown tool '{reference}' (built-ins: {known}; custom tools: package.module:function)")


def _check_tool_reference(reference: str, info: ValidationInfo) -> str:
    # A spec from somewhere untrusted (a trace someone shared) is validated with context {"import_tools": False}:
    # importing a module named there runs its code.
    if isinstance(info.context, dict) and info.context.get("import_tools") is False:
        return check_tool_syntax(reference)
    resolve_tool(reference)
    return reference


class ModelSpec(BaseModel):
    """Which model to call and how big its window is."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1)
    base_url: str | None = None
    api_key_env: str = "OPENAI_API_KEY"
    temperature: float = Field(0.7, ge=0, le=2)
    context_window: int = Field(8192, gt=0)
    max_output_tokens: int = Field(1024, gt=0)
    encoding: str | None = Field(None, description="tiktoken encoding; default o200k_base")
    request_timeout_s: float = Field(60.0, gt=0, description="one attempt at the endpoint, body included")
    turn_deadline_s: float = Field(300.0, gt=0, description="a whole turn: every attempt, retry and tool call")

    @model_validator(mode="after")
    def _fits(self) -> ModelSpec:
        # Checked at load, not at the first compile: a window the reply reserve fills has no room for a prompt.
        if self.context_window <= self.max_output_tokens:
            raise ValueError(
                f"context_window: {self.context_window} leaves no room for the prompt after the "
                f"output reserve (max_output_tokens {self.max_output_tokens}); make it larger"
            )
        if self.encoding is not None and self.encoding not in SHIPPED_ENCODINGS:
            raise ValueError(f"encoding: unknown encoding {self.encoding!r}; shipped: {', '.join(SHIPPED_ENCODINGS)}")
        return self


@functools.cache
def _later_default(cls: type[BaseModel], name: str) -> Any:
    """A later field's default, built once and only compared with: a default factory builds a new model at every
    call, which made `spec_hash` cost 0.4 ms (a daemon loading an agent computes it twice)."""
    return cls.model_fields[name].get_default(call_default_factory=True)


def later_defaults(model: BaseModel) -> dict[Any, Any]:
    """A `model_dump` exclude for the fields added after agents existed (each class's `LATER_FIELDS`) that are
    still at their defaults, at any depth: the spec's fingerprint leaves them out, so adding a field changes no
    existing agent's `spec_hash`."""
    fields = type(model).model_fields
    exclude: dict[Any, Any] = {
        name: True
        for name in getattr(model, "LATER_FIELDS", ())
        if getattr(model, name) == _later_default(type(model), name)
    }
    for name in fields.keys() - exclude.keys():
        value = getattr(model, name)
        if isinstance(value, BaseModel):
            inner = later_defaults(value)
        elif isinstance(value, list):
            inner = {
                i: e for i, item in enumerate(value) if isinstance(item, BaseModel) and (e := later_defaults(item))
            }
        else:
            continue
        if inner:
            exclude[name] = inner
    return exclude


class BlockSpec(BaseModel):
    """A core-memory block's definition; `value` seeds a new agent only."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, serialize_by_alias=True)

    label: str = Field(pattern=r"^[a-z][a-z0-9_]{0,63}$")
    value: str = ""
    limit: int = Field(2000, gt=0)
    description: str = ""
    read_only: bool = False
    schema_: dict[str, Any] | str | None = Field(
        None,
        alias="schema",
        description="makes the block structured: its value is JSON matching this inline JSON "
        "Schema, or the pydantic model named `package.module:Model`",
    )
    ephemeral: bool = Field(False, description="working notes: reset to `value` when a session ends")
    _schema: BlockSchema | None = PrivateAttr(None)
    LATER_FIELDS: ClassVar[tuple[str, ...]] = ("schema_", "ephemeral")  # see `later_defaults`

    @model_validator(mode="before")
    @classmethod
    def _mapping_value(cls, data: Any) -> Any:
        # A structured block's seed may be written as YAML (a mapping); it is stored as JSON.
        if isinstance(data, dict) and isinstance(data.get("value"), (dict, list)) and data.get("schema") is not None:
            data = {**data, "value": json.dumps(data["value"], ensure_ascii=False)}
        return data

    @model_validator(mode="after")
    def _value_fits(self, info: ValidationInfo) -> BlockSpec:
        self.value = self.value.strip()  # YAML block scalars end with a newline that is not memory
        trusted = not (isinstance(info.context, dict) and info.context.get("import_tools") is False)
        if self.schema_ is not None and (trusted or isinstance(self.schema_, dict)):
            self.value = self._checked_seed(self.block_schema())
        if len(self.value) > self.limit:
            raise ValueError(f"value has {len(self.value)} characters, over its limit of {self.limit}")
        return self

    def _checked_seed(self, schema: BlockSchema) -> str:
        """The seed as stored JSON (empty means `{}`); raises ValueError naming what does not match."""
        try:
            data = json.loads(self.value or "{}")
        except json.JSONDecodeError as exc:
            raise ValueError(
                f"value: not JSON ({exc.msg} at line {exc.lineno} column {exc.colno}); a block with a schema holds JSON"
            ) from None
        problems = schema.problems(data)
        if problems:
            raise ValueError(f"value: does not match the block's schema: {schema.explain(problems)}")
        return dump_json(data)

    def block_schema(self) -> BlockSchema | None:
        """The block's schema, resolved (a `module:Model` reference is imported on first use); raises ValueError
        naming the field for a schema that is not valid or cannot be imported."""
        if self.schema_ is None or self._schema is not None:
            return self._schema
        try:
            resolved = (
                BlockSchema.inline(self.schema_)
                if isinstance(self.schema_, dict)
                else BlockSchema.resolve(self.schema_)
            )
        except ValueError as exc:
            raise ValueError(f"schema: {exc}") from None
        self._schema = resolved
        return resolved

    def to_block(self, value: str) -> Block:
        """The block this definition describes, holding `value` (a stored value, or the seed)."""
        return Block(
            self.label, value, self.limit, self.description, self.read_only, self.block_schema(), self.ephemeral
        )


class AgentSpec(BaseModel):
    """One agent, as its YAML file defines it."""

    model_config = ConfigDict(extra="forbid")
    LATER_FIELDS: ClassVar[tuple[str, ...]] = ("template", "schedule", "idle")  # see `later_defaults`

    name: str = Field(pattern=_NAME)
    description: str = ""
    model: ModelSpec
    system: str = Field(min_length=1)
    blocks: list[BlockSpec] = Field(default_factory=list)
    tools: list[Annotated[str, AfterValidator(_check_tool_reference)]] = Field(
        default_factory=lambda: list(DEFAULT_TOOLS)
    )
    max_steps_per_turn: int = Field(10, gt=0)
    memory: MemoryConfig = Field(default_factory=MemoryConfig)
    schedule: list[ScheduleTrigger] = Field(default_factory=list, description="cron / every triggers (the daemon)")
    idle: IdleTrigger | None = Field(None, description="fired once after the agent has been idle this long")
    template: bool = Field(
        False, description="a template for agents made through the daemon (`pagemind serve`), not an agent of its own"
    )

    @model_validator(mode="after")
    def _unique_labels(self) -> AgentSpec:
        seen: dict[str, int] = {}
        for index, block in enumerate(self.blocks):
            if block.label in seen:
                raise ValueError(
                    f"blocks[{index}].label: duplicate block label '{block.label}' (first at blocks[{seen[block.label]}])"
                )
            seen[block.label] = index
        check_unique(self.schedule, self.idle)
        return self

    def resolved_tools(self) -> dict[str, Tool]:
        """The agent's tools by name, imported and ready to dispatch."""
        resolved = [resolve_tool(ref) for ref in self.tools]
        return {t.name: t for t in resolved}

    def spec_hash(self) -> str:
        """A stable fingerprint of the definition, to tell when the YAML changed."""
        # Fields added later are left out at their defaults: adding them changed no existing agent's fingerprint.
        dumped = self.model_dump_json(exclude=later_defaults(self))
        return hashlib.sha256(dumped.encode()).hexdigest()[:16]


_PATH_IN_MESSAGE = re.compile(r"^((?:\w+)(?:\[\d+\])?(?:\.\w+(?:\[\d+\])?)*): (.*)$", re.S)
_PATH_PART = re.compile(r"(\w+)|\[(\d+)\]")


def _format_loc(loc: tuple[Any, ...]) -> str:
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text


def _node_line(root: yaml.Node | None, loc: tuple[Any, ...]) -> int:
    """The 1-based line of the YAML node at `loc`, or of its nearest existing ancestor."""
    node, line = root, (root.start_mark.line + 1 if root is not None else 1)
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
        node, line = child, child.start_mark.line + 1
    return line


def _message(error: dict[str, Any]) -> str:
    msg = error["msg"]
    msg = re.sub(r"^Value error, ", "", msg)
    if error["type"] == "extra_forbidden":
        return "unknown key"
    return re.sub(r"^Input should be ", "must be ", msg)


def _problems(path: Path, root: yaml.Node | None, error: ValidationError) -> list[str]:
    problems = []
    for item in error.errors():
        loc = tuple(item["loc"])
        message = _message(item)
        embedded = _PATH_IN_MESSAGE.match(message)
        if embedded:  # a model-level check that names the field itself, e.g. a duplicate label
            loc += tuple(int(i) if i else n for n, i in _PATH_PART.findall(embedded.group(1)))
            message = embedded.group(2)
        where = _format_loc(loc) or "(top level)"
        problems.append(f"{path}:{_node_line(root, loc)} {where}: {message}")
    return problems


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
    """Read and validate an agent YAML file; raises SpecError naming file, line and field for every problem."""
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
    return parse_spec(text, path)


def parse_spec(text: str, source: str | Path = "<agent>", *, import_tools: bool = True) -> AgentSpec:
    """Validate an agent definition given as YAML text (the API receives agents this way); errors name `source`,
    line and field. `import_tools=False` for text from elsewhere: custom tool modules are checked, not imported."""
    root, data = _parse(Path(source), text)
    if not isinstance(data, dict):
        raise SpecError([f"{source}:1 (top level): must be a mapping of fields (name, model, system, …)"])
    try:
        return AgentSpec.model_validate(data, context={"import_tools": import_tools})
    except ValidationError as exc:
        raise SpecError(_problems(Path(source), root, exc)) from None
